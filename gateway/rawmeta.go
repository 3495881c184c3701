package gateway

import (
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessMetaCache remembers the per-request members of 2026-07-28
// requests found valid, so that the raw path checks each distinct pair of
// clientCapabilities and clientInfo once, not on every call: a client
// sends the same bytes with each request. The set is copied on write and
// read with one atomic load, without a lock on the call path; it stops
// growing at statelessMetaMax entries (further pairs are checked on every
// call).
type statelessMetaCache struct {
	mu   sync.Mutex // serializes writers
	seen atomic.Pointer[map[string]*mcp.ClientCapabilities]
}

const statelessMetaMax = 256

// valid reports whether the SEP-2575 members of msg (Scan read it as env)
// are as the SDK requires them: clientCapabilities present, and it and
// clientInfo (optional) decoding into the SDK's types; the protocol
// version is the caller's to check. It returns the client's capabilities
// as the SDK's request gives them (ClientCapabilities), shared: never
// modified. A request that fails takes the slow
// path, where the SDK answers it with its own error. The check decodes
// more strictly than the SDK (encoding/json matches keys case
// insensitively, so a case-variant key of the wrong type fails here and
// passes there), never less: the raw path takes no request the SDK would
// refuse.
func (c *statelessMetaCache) valid(msg []byte, env *envelope.Envelope) (*mcp.ClientCapabilities, bool) {
	capsJSON, info := env.ClientCapabilities.In(msg), env.ClientInfo.In(msg)
	if capsJSON == nil {
		return nil, false
	}
	// The key: both values, NUL-separated (a NUL never appears raw in
	// JSON). Built on the stack for small members.
	var buf [512]byte
	key := append(append(append(buf[:0], capsJSON...), 0), info...)
	if m := c.seen.Load(); m != nil {
		if caps, ok := (*m)[string(key)]; ok {
			return caps, true
		}
	}
	// The 2026-07-28 form, where roots is a pointer.
	var v2 struct {
		mcp.ClientCapabilities
		Roots *mcpx.RootCapabilities `json:"roots,omitempty"`
	}
	if err := json.Unmarshal(capsJSON, &v2); err != nil {
		return nil, false
	}
	if info != nil {
		var impl mcp.Implementation
		if err := json.Unmarshal(info, &impl); err != nil {
			return nil, false
		}
	}
	caps := &v2.ClientCapabilities
	mcpx.SetRootsV2(caps, v2.Roots)
	c.remember(string(key), caps)
	return caps, true
}

// remember adds key to the set, unless it is full.
func (c *statelessMetaCache) remember(key string, caps *mcp.ClientCapabilities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.seen.Load()
	n := 0
	if old != nil {
		n = len(*old)
	}
	if n >= statelessMetaMax {
		return
	}
	m := make(map[string]*mcp.ClientCapabilities, n+1)
	if old != nil {
		maps.Copy(m, *old)
	}
	m[key] = caps
	c.seen.Store(&m)
}
