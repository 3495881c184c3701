package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawIDPrefix starts the id of every raw call: a string, where the SDK's
// own ids are numbers, so that the two never collide on one pipe.
const rawIDPrefix = "manifold-"

// stdioReadBuffer is the read buffer of a stdio connection; longer lines
// are gathered in a slice of their own, up to maxMessageBytes.
const stdioReadBuffer = 64 << 10

// errConnClosed fails the raw calls pending when the connection closes.
var errConnClosed = fmt.Errorf("%w: stdio connection closed", mcp.ErrConnectionClosed)

// stdioConn is a newline-delimited JSON-RPC connection over a stdio
// upstream's pipes, shared by the SDK client session (it is the session's
// mcp.Transport and mcp.Connection) and by raw calls (call), which send
// requests with string ids (rawIDPrefix) and receive the response lines to
// them as bytes, never decoded into SDK types. Every other line
// (responses to the SDK's ids, notifications, server requests, batches) is
// decoded and handed to the SDK, as its own IOTransport would.
//
// A line, or a JSON value spread over several lines, longer than max bytes
// fails the connection (ErrTooLarge), as the SDK's MaxLineLength does. When
// the connection fails or closes, pending raw calls fail at once.
//
// Read is called by the SDK's one reading goroutine; Write, call and
// Close are safe for concurrent use.
type stdioConn struct {
	r   io.ReadCloser
	w   io.WriteCloser
	br  *bufio.Reader
	max int

	queue []jsonrpc.Message // decoded but not yet returned by Read (batches)

	writeMu sync.Mutex

	// meta is the _meta members every raw call carries on a stateless
	// version (requestMeta); set once the session is initialized, before
	// the connection takes raw calls.
	meta []byte

	mu      sync.Mutex
	pending map[uint64]*rawCall
	nextID  uint64
	err     error                    // set once: the connection failed or closed
	batches map[jsonrpc.ID]*msgBatch // server requests received in a batch

	closeOnce sync.Once
	closeErr  error
	notifying sync.WaitGroup // cancellation notifications being written
	writers   sync.WaitGroup // requests being written by writeAsync's goroutines

	expiry *expiry // the timeouts of raw calls
}

var (
	_ mcp.Transport  = (*stdioConn)(nil)
	_ mcp.Connection = (*stdioConn)(nil)
)

func newStdioConn(r io.ReadCloser, w io.WriteCloser, max int) *stdioConn {
	c := &stdioConn{r: r, w: w, br: bufio.NewReaderSize(r, min(stdioReadBuffer, max+1)), max: max, pending: map[uint64]*rawCall{}}
	c.expiry = newExpiry(c.expire)
	return c
}

// Connect returns the connection itself: a client connects once.
func (c *stdioConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// SessionID is empty: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message for the SDK, delivering the responses to
// raw calls met on the way. Any error ends the connection, as it ends the
// SDK's reading: pending raw calls fail at once. After Close it returns
// io.EOF, as the SDK's own IOTransport does, so that a close is not
// reported as the upstream's failure.
func (c *stdioConn) Read(ctx context.Context) (msg jsonrpc.Message, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if c.closedByUs() {
				err = io.EOF
			}
			c.fail(err)
		}
	}()
	for {
		if len(c.queue) > 0 {
			msg := c.queue[0]
			c.queue = c.queue[1:]
			if c.deliverDecoded(msg) {
				continue // a batch's answer to a raw call, in its turn
			}
			return msg, nil
		}
		data, env, scanErr, err := c.readMessage()
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("[")) {
			if err := c.readBatch(data); err != nil {
				return nil, err
			}
			continue
		}
		if scanErr == nil && c.deliverScanned(data, &env) {
			continue
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return nil, err
		}
		if c.deliverDecoded(msg) {
			continue
		}
		return msg, nil
	}
}

// readMessage reads the next JSON value, normally one line, into a slice
// of its own, and scans it. A line that leaves the value unfinished is
// continued by the next, as the SDK's decoder does; blank lines are skipped.
func (c *stdioConn) readMessage() (data []byte, env envelope.Envelope, scanErr, err error) {
	for {
		max := c.max
		if len(data) > 0 {
			max -= len(data) + 1 // what the value holds, and the '\n' joining the line
		}
		line, err := c.readLine(max)
		if err != nil {
			return nil, env, nil, err
		}
		if len(data) == 0 {
			if len(bytes.TrimLeft(line, " \t\r")) == 0 {
				continue
			}
			data = line
		} else {
			data = append(append(data, '\n'), line...)
		}
		env, scanErr = envelope.Scan(data)
		if errors.Is(scanErr, envelope.ErrNotSimple) {
			// Scan stopped early: is the value complete?
			if verr := envelope.Validate(data); errors.Is(verr, envelope.ErrTruncated) {
				scanErr = verr
			}
		}
		if !errors.Is(scanErr, envelope.ErrTruncated) {
			return data, env, scanErr, nil
		}
	}
}

// readLine returns the next line without its '\n', in a new slice; a line
// of more than max bytes is an error, and is not read further.
func (c *stdioConn) readLine(max int) ([]byte, error) {
	frag, err := c.br.ReadSlice('\n')
	if err == nil {
		frag = frag[:len(frag)-1]
		if len(frag) > max {
			return nil, c.tooLarge()
		}
		return bytes.Clone(frag), nil
	}
	// A line longer than the read buffer: keep copies of the full buffers
	// and join them once, at the line's size. Growing one slice by append
	// would allocate about four times the line in all (measured: 38 MB for
	// a 4 MiB result); this allocates about twice.
	var chunks [][]byte
	n := 0
	for {
		if n+len(frag) > max+1 { // +1: the '\n' may be in frag
			return nil, c.tooLarge()
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunks = append(chunks, bytes.Clone(frag))
		n += len(frag)
		frag, err = c.br.ReadSlice('\n')
	}
	line := make([]byte, 0, n+len(frag))
	for _, ch := range chunks {
		line = append(line, ch...)
	}
	line = append(line, frag...)
	switch {
	case err == nil:
		return line[:len(line)-1], nil
	case errors.Is(err, io.EOF) && len(line) > 0 && len(line) <= max:
		return line, nil // a last line without its newline
	case errors.Is(err, io.EOF) && len(line) > 0:
		return nil, c.tooLarge()
	default:
		return nil, err
	}
}

func (c *stdioConn) tooLarge() error {
	return fmt.Errorf("%w: a message of more than %d bytes", ErrTooLarge, c.max)
}

// Write sends a message of the SDK's.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if batch, ok := c.inBatch(resp); ok {
			if batch == nil {
				return nil // the batch is not complete yet
			}
			data, err := encodeBatch(batch)
			if err != nil {
				return err
			}
			return c.write(append(data, '\n'))
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	return c.write(append(data, '\n'))
}

func (c *stdioConn) write(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.w.Write(line)
	return err
}

// Close closes both pipes, which ends a pending Read, and fails the
// pending raw calls.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(errConnClosed)
		c.expiry.stop()
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
		c.notifying.Wait()
		c.writers.Wait()
	})
	return c.closeErr
}

// closedByUs reports whether Close (or a failed write, which closes) ended
// the connection before the current read failed.
func (c *stdioConn) closedByUs() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// fail records the connection's end and fails every pending raw call.
func (c *stdioConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pending := c.pending
	c.pending = map[uint64]*rawCall{}
	err = c.err
	c.mu.Unlock()
	for _, rc := range pending {
		rc.complete(rawReply{err: err})
	}
}

// deliverScanned hands a simple response to its raw call, if it answers one.
func (c *stdioConn) deliverScanned(data []byte, env *envelope.Envelope) bool {
	n, reply, ok := scannedReply(data, env)
	if ok {
		c.deliver(n, reply)
	}
	return ok
}

// deliverDecoded hands a response the SDK decoded (one that was not
// simple: the SDK's reading, last duplicate key first, decides) to its raw
// call, if it answers one.
func (c *stdioConn) deliverDecoded(msg jsonrpc.Message) bool {
	n, reply, ok := decodedReply(msg)
	if ok {
		c.deliver(n, reply)
	}
	return ok
}

// scannedReply returns the number of the raw call that a simple response
// (Scan read data as env) answers, and the reply: ok is false for any
// other message.
func scannedReply(data []byte, env *envelope.Envelope) (uint64, rawReply, bool) {
	if !env.IsResponse() {
		return 0, rawReply{}, false
	}
	n, ok := rawCallID(envelope.Text(env.ID.In(data)), env.ID.In(data)[0] == '"')
	if !ok {
		return 0, rawReply{}, false
	}
	reply := rawReply{result: env.Result.In(data)}
	if env.Error.Present() {
		reply.rpcErr = decodeWireError(env.Error.In(data))
	}
	return n, reply, true
}

// decodedReply is scannedReply for a decoded message.
func decodedReply(msg jsonrpc.Message) (uint64, rawReply, bool) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return 0, rawReply{}, false
	}
	id, ok := resp.ID.Raw().(string)
	if !ok {
		return 0, rawReply{}, false
	}
	n, ok := rawCallID([]byte(id), true)
	if !ok {
		return 0, rawReply{}, false
	}
	reply := rawReply{result: resp.Result}
	if resp.Error != nil {
		var we *jsonrpc.Error
		if !errors.As(resp.Error, &we) {
			we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
		}
		reply.rpcErr, reply.result = we, nil
	} else if reply.result == nil {
		reply.result = []byte("null")
	}
	return n, reply, true
}

// rawCallID parses the number of a raw call's id (given decoded).
func rawCallID(id []byte, isString bool) (uint64, bool) {
	if !isString || !bytes.HasPrefix(id, []byte(rawIDPrefix)) {
		return 0, false
	}
	digits := id[len(rawIDPrefix):]
	if len(digits) == 0 || len(digits) > 19 || digits[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + uint64(d-'0')
	}
	return n, true
}

func decodeWireError(raw []byte) *jsonrpc.Error {
	var we jsonrpc.Error
	if err := json.Unmarshal(raw, &we); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "malformed error from the upstream: " + err.Error()}
	}
	return &we
}

// deliver completes raw call n; a response to no pending call (one that
// was cancelled, or never sent) is dropped, as the SDK drops its own.
func (c *stdioConn) deliver(n uint64, reply rawReply) {
	c.mu.Lock()
	rc := c.pending[n]
	delete(c.pending, n)
	c.mu.Unlock()
	if rc != nil {
		rc.complete(reply)
	}
}

// msgBatch tracks the server requests of one incoming batch, whose
// responses go back as one batch (JSON-RPC 2.0), as the SDK's IOTransport
// does.
type msgBatch struct {
	unresolved map[jsonrpc.ID]int
	responses  []*jsonrpc.Response
}

// readBatch decodes a batch, delivers its responses to raw calls and
// queues the rest for Read.
func (c *stdioConn) readBatch(data []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return fmt.Errorf("unmarshaling jsonrpc batch: %w", err)
	}
	if len(raws) == 0 {
		return errors.New("empty batch")
	}
	var batch *msgBatch
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return err
		}
		// Every message is queued, answers to raw calls too: Read hands
		// them over in the batch's order, so that a notification before an
		// answer reaches the relay first (relayConn takes it from Read),
		// and a call that settles its notifications finds it queued.
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if batch == nil {
				batch = &msgBatch{unresolved: map[jsonrpc.ID]int{}}
			}
			if _, dup := batch.unresolved[req.ID]; dup {
				return fmt.Errorf("duplicate message ID %q", req.ID)
			}
			batch.unresolved[req.ID] = len(batch.responses)
			batch.responses = append(batch.responses, nil)
		}
		c.queue = append(c.queue, msg)
	}
	if batch != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		for id := range batch.unresolved {
			if _, dup := c.batches[id]; dup {
				return fmt.Errorf("invalid request: batch contains previously seen request %v", id.Raw())
			}
		}
		if c.batches == nil {
			c.batches = map[jsonrpc.ID]*msgBatch{}
		}
		for id := range batch.unresolved {
			c.batches[id] = batch
		}
	}
	return nil
}

// inBatch records resp if it answers a request of a batch: ok, and the
// batch's responses once it is complete.
func (c *stdioConn) inBatch(resp *jsonrpc.Response) ([]*jsonrpc.Response, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	batch, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	batch.responses[batch.unresolved[resp.ID]] = resp
	delete(batch.unresolved, resp.ID)
	delete(c.batches, resp.ID)
	if len(batch.unresolved) > 0 {
		return nil, true
	}
	return batch.responses, true
}

func encodeBatch(responses []*jsonrpc.Response) ([]byte, error) {
	raws := make([]json.RawMessage, len(responses))
	for i, r := range responses {
		data, err := jsonrpc.EncodeMessage(r)
		if err != nil {
			return nil, fmt.Errorf("encoding batch message: %w", err)
		}
		raws[i] = data
	}
	return json.Marshal(raws)
}

// appendRawID appends the JSON id of raw call n.
func appendRawID(dst []byte, n uint64) []byte {
	dst = append(dst, '"')
	dst = append(dst, rawIDPrefix...)
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '"')
}
