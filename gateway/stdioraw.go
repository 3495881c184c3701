package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// stdioFront is the raw path's front of one stdio session (ServeStdio):
// filterLines hands it every well-formed client line, and it serves those
// rawTake accepts, each in a goroutine of its own, as the SDK serves
// calls. Their responses go to the session's one output, beside the SDK's
// writes, and what their upstreams send for them (progress, logs,
// sampling, elicitation, roots) goes through the SDK session on that same
// output (relay.go); the client's answers to such requests reach the SDK,
// which sent them.
//
// It keeps what the SDK keeps for its own calls: the ids in flight, so
// that a duplicate id is dropped as the SDK drops one, and that the
// client's notifications/cancelled for a raw call cancels it.
type stdioFront struct {
	g   *Gateway
	out *lockedWriter
	ss  atomic.Pointer[mcp.ServerSession] // nil until the SDK session is connected

	ctx    context.Context // the session's; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // raw calls in flight

	mu sync.Mutex
	// calls are the raw calls in flight, by idKey: what ends each early
	// (its context's cancel, or fastCall.abort).
	calls map[string]func()
	done  bool // close has begun: no new call
}

var _ rawFront = (*stdioFront)(nil)

func newStdioFront(ctx context.Context, g *Gateway, out *lockedWriter) *stdioFront {
	f := &stdioFront{g: g, out: out, calls: map[string]func(){}}
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return f
}

// close cancels the raw calls in flight and waits for them to end: a
// client that closed its input has gone, and the SDK cancels its own calls
// alike.
func (f *stdioFront) close() {
	f.mu.Lock()
	f.done = true
	aborts := make([]func(), 0, len(f.calls))
	for _, abort := range f.calls {
		aborts = append(aborts, abort)
	}
	f.mu.Unlock()
	f.cancel()
	for _, abort := range aborts { // fast calls wait on no context
		abort()
	}
	f.wg.Wait()
}

func (f *stdioFront) session() *mcp.ServerSession { return f.ss.Load() }
func (f *stdioFront) caller() caller              { return caller{local: true} }
func (f *stdioFront) transport() string           { return telemetry.TransportPipe }

// take serves msg, a client line Scan read as env, when it is a raw call
// or the cancellation of one, and reports whether it did; false leaves
// msg to the SDK. msg is copied: the caller reuses it.
func (f *stdioFront) take(msg []byte, env *envelope.Envelope) bool {
	if !env.ID.Present() && bytes.Equal(env.Method.In(msg), []byte(`"notifications/cancelled"`)) {
		return f.cancelled(msg)
	}
	r := f.g.rawTake(f.ctx, f, msg, env)
	if r == nil || r.stateless && r.env.LogLevel.Present() {
		// A 2026-07-28 request's own log level: the SDK relays log
		// messages at the level of the request it serves, and at the
		// session's (none for such a client) for any other.
		return false
	}
	r.msg = bytes.Clone(msg) // the spans are offsets: they stay valid
	key := idKey(r.id())
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return false // the session is ending: the SDK answers
	}
	if _, dup := f.calls[key]; dup {
		// As the SDK does: dropped unanswered, since an answer with this
		// id would be taken for the call's.
		f.mu.Unlock()
		f.g.log.Warn("stdio: a request reuses the id of a call in flight; dropped", zap.ByteString(keyID, r.id()))
		return true
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.wg.Add(1)
	if f.g.stdioFast(r) {
		fc := &fastCall{f: f, r: r, key: key, ctx: ctx, cancel: cancel}
		f.calls[key] = fc.abort
		f.mu.Unlock()
		fc.start() // stdiofast.go
		return true
	}
	f.calls[key] = cancel
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		a := f.g.serveAnswer(ctx, f, r)
		f.end(key, cancel)
		f.out.writeLine(&a)
	}()
	return true
}

// end forgets the raw call of key.
func (f *stdioFront) end(key string, cancel context.CancelFunc) {
	f.mu.Lock()
	delete(f.calls, key)
	f.mu.Unlock()
	cancel()
}

// cancelled cancels the raw call a notifications/cancelled names, and
// reports whether there was one; one for another id goes to the SDK.
func (f *stdioFront) cancelled(msg []byte) bool {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || len(n.Params.RequestID) == 0 {
		return false
	}
	f.mu.Lock()
	abort, ok := f.calls[idKey(n.Params.RequestID)]
	f.mu.Unlock()
	if ok {
		abort()
	}
	return ok
}

// idKey is the key of a JSON-RPC id, string or number, as the SDK tells
// ids apart: a string by its value, a number by its value as the SDK
// decodes it (a float64, then truncated to an int64), so that 1, 1.0, 1e0
// and 1.5 are one id, as they are to the SDK.
func idKey(id []byte) string {
	if len(id) > 0 && id[0] == '"' {
		return "s" + string(envelope.Text(id))
	}
	if plainID(id) {
		return "n" + string(id)
	}
	f, err := strconv.ParseFloat(string(id), 64)
	if err != nil {
		return "n" + string(id)
	}
	return "n" + strconv.FormatInt(int64(f), 10)
}

// plainID reports whether id is a number the SDK reads back as written:
// digits without a sign, fraction or exponent, few enough (15) that a
// float64 holds them exactly, no leading zero. The raw path answers other
// numbers' requests on the SDK path (rawMethodOf), whose answer carries
// the id as the SDK read it.
func plainID(id []byte) bool {
	if len(id) == 0 || len(id) > 15 || id[0] == '0' && len(id) > 1 {
		return false
	}
	for _, b := range id {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}
