package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/manifold-mcp/manifold/internal/envelope"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// parseErrorLine is the JSON-RPC answer to a line that is not JSON: the id
// cannot be known, so it is null (JSON-RPC 2.0 §5).
const parseErrorLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the message is not valid JSON"}}` + "\n"

// errTooLarge ends a stdio session whose client sent an oversized message.
var errTooLarge = errors.New("message too large")

// ServeStdio serves one client over r and w (the process's stdin and
// stdout) until the client disconnects or ctx is done.
//
// Each line is checked before the SDK sees it: a line that is not JSON is
// answered with a JSON-RPC parse error and dropped (the SDK would close the
// session), a line over gateway.limits.maxMessageBytes ends the session
// with a logged error, since the rest of it cannot be framed, and a call
// the raw path takes (rawTake; stdioraw.go) is served without the SDK.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	// The limit is the one serving when the session starts; a stdio gateway
	// serves one session for its whole life.
	max := int(g.current().edge.maxBytes)
	if err := g.stdioOAuth(ctx); err != nil {
		return fmt.Errorf("stdio: sign-in listener: %w", err)
	}
	out := &lockedWriter{w: w}
	front := newStdioFront(ctx, g, out)
	defer front.close()
	pr, pw := io.Pipe()
	defer pr.Close()

	t := &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{out}, MaxLineLength: max + 1}
	// The session's handlers run in this context: it names the principal.
	ss, err := g.server.Connect(context.WithValue(ctx, localKey{}, true), t, nil)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	// The client's lines are read only once the raw path knows the
	// session: a call read before would find no session, and go to the SDK.
	front.ss.Store(ss)
	go func() {
		err := g.filterLines(r, pw, out, max, front)
		// The client's input has ended: its raw calls are cancelled (and
		// their upstreams told) before the SDK session sees the end, which
		// closes the session's per-client upstream sessions.
		front.close()
		pw.CloseWithError(err)
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		err = <-done
	}
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		g.log.Error("stdio session ended", zap.Error(err))
		return fmt.Errorf("stdio session: %w", err)
	}
	return nil
}

// filterLines copies JSON lines from r to pass, answers non-JSON lines on
// out, hands the lines raw takes to it, and stops at EOF (nil), an
// oversized line, or a closed pass. raw may be nil (everything passes).
func (g *Gateway) filterLines(r io.Reader, pass io.Writer, out io.Writer, max int, raw *stdioFront) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max+1 { // +1: the newline
			return fmt.Errorf("%w: over %d bytes (gateway.limits.maxMessageBytes)", errTooLarge, max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > max && line[len(line)-1] != '\n' { // a last line, without its newline
			return fmt.Errorf("%w: over %d bytes (gateway.limits.maxMessageBytes)", errTooLarge, max)
		}
		if msg := bytes.TrimSpace(line); len(msg) > 0 {
			env, serr := envelope.Scan(msg)
			switch {
			case errors.Is(serr, envelope.ErrSyntax), serr != nil && !json.Valid(msg): // deeper than Scan looks
				g.log.Warn("stdio: message is not valid JSON; answered with a parse error", zap.Int("bytes", len(msg)))
				io.WriteString(out, parseErrorLine)
			case raw != nil && serr == nil && raw.take(msg, &env):
			default:
				if _, werr := pass.Write(line); werr != nil {
					return werr
				}
				if line[len(line)-1] != '\n' {
					pass.Write([]byte{'\n'})
				}
			}
		}
		line = line[:0]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// lockedWriter serializes the SDK's writes and the filter's parse errors.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeLine writes a raw call's answer as one line, its pieces under one
// lock. A write that fails has ended the session (the SDK's next write
// fails alike), so its error is not kept.
func (l *lockedWriter) writeLine(a *rawAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = a.writeLine(l.w)
}

// writeLineNoWait writes a's line as writeLine does, without ever waiting
// for the client: when the output is free and takes the whole line in one
// attempt (a pipe or socket written with rawio, TryWrite), here; else from
// a goroutine, which keeps the lock until the line is out, so that no
// other line lands inside it. then.written runs once the line is out or
// its write failed, on whichever goroutine wrote it. The stdio fast path
// answers from the goroutine that reads the upstream, which must not stop
// reading when the client does: the upstream's other answers, and those to
// the gateway's pings, would go unread, and the connection be given up.
func (l *lockedWriter) writeLineNoWait(a *rawAnswer, then lineWriter) {
	tw, ok := l.w.(interface{ TryWrite([]byte) (int, error) })
	if !ok || a.len() > joinedLineMax || !l.mu.TryLock() {
		ac := *a // for the goroutine; a is the caller's
		go func() {
			l.writeLine(&ac)
			then.written()
		}()
		return
	}
	bp := lineBuffers.Get().(*[]byte)
	line := a.joinLine(bp)
	n, err := tw.TryWrite(line)
	if err != nil || n == len(line) {
		l.mu.Unlock()
		lineBuffers.Put(bp)
		then.written()
		return
	}
	go func() { // the output is full: the rest, under the lock
		_, _ = l.w.Write(line[n:])
		l.mu.Unlock()
		lineBuffers.Put(bp)
		then.written()
	}()
}

// lineWriter is what writeLineNoWait tells when its line is out.
type lineWriter interface{ written() }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
