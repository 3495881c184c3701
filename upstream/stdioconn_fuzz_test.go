package upstream

import (
	"bytes"
	"context"
	"io"
	"testing"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// FuzzStdioConn: whatever a stdio upstream writes, the connection returns
// messages or an error, never panics nor loops, and a raw call pending
// when the input ends fails rather than hanging; a response it receives
// is a slice of what was read.
func FuzzStdioConn(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"manifold-1","result":{"a":1}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`,
		"\n\r\n{\n\"jsonrpc\":\"2.0\",\n\"id\":\"manifold-1\",\"error\":{\"code\":1,\"message\":\"m\"}}\r\n",
		`[{"jsonrpc":"2.0","id":"manifold-1","result":1},{"jsonrpc":"2.0","id":3,"method":"ping"}]` + "\n",
		`{"jsonrpc":"2.0","id":"manifold-1","id":"manifold-2","result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":"manif\u006fld-1","result":[]}`, "[]\n", "{\n", `"x"` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newStdioConn(io.NopCloser(bytes.NewReader(data)), nopWriteCloser{io.Discard}, 200)
		// A raw call "manifold-1" pending, as call registers it.
		rc := &rawCall{done: make(chan rawReply, 1)}
		c.nextID = 1
		c.pending[1] = rc
		for range len(data) + 2 {
			if _, err := c.Read(context.Background()); err != nil {
				break
			}
		}
		c.Close()
		select {
		case r := <-rc.done:
			// "null" stands for a response with neither result nor error.
			if r.result != nil && string(r.result) != "null" && !bytes.Contains(data, r.result) {
				t.Fatalf("raw call result %q is not in the input", r.result)
			}
			if r.result == nil && r.rpcErr == nil && r.err == nil {
				t.Fatal("an empty reply")
			}
		default:
			t.Fatal("the pending raw call was neither answered nor failed")
		}
	})
}
