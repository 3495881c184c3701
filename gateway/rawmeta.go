package gateway

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/internal/envelope"
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
	seen atomic.Pointer[map[string]struct{}]
}

const statelessMetaMax = 256

// valid reports whether the SEP-2575 members of msg (Scan read it as env)
// are as the SDK requires them: clientCapabilities present, and it and
// clientInfo (optional) decoding into the SDK's types; the protocol
// version is the caller's to check. A request that fails takes the slow
// path, where the SDK answers it with its own error. The check decodes
// more strictly than the SDK (encoding/json matches keys case
// insensitively, so a case-variant key of the wrong type fails here and
// passes there), never less: the raw path takes no request the SDK would
// refuse.
func (c *statelessMetaCache) valid(msg []byte, env *envelope.Envelope) bool {
	caps, info := env.ClientCapabilities.In(msg), env.ClientInfo.In(msg)
	if caps == nil {
		return false
	}
	// The key: both values, NUL-separated (a NUL never appears raw in
	// JSON). Built on the stack for small members.
	var buf [512]byte
	key := append(append(append(buf[:0], caps...), 0), info...)
	if m := c.seen.Load(); m != nil {
		if _, ok := (*m)[string(key)]; ok {
			return true
		}
	}
	var v2 struct {
		mcp.ClientCapabilities
		Roots *struct {
			ListChanged bool `json:"listChanged,omitempty"`
		} `json:"roots,omitempty"`
	}
	if err := json.Unmarshal(caps, &v2); err != nil {
		return false
	}
	if info != nil {
		var impl mcp.Implementation
		if err := json.Unmarshal(info, &impl); err != nil {
			return false
		}
	}
	c.remember(string(key))
	return true
}

// remember adds key to the set, unless it is full.
func (c *statelessMetaCache) remember(key string) {
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
	m := make(map[string]struct{}, n+1)
	if old != nil {
		for k := range *old {
			m[k] = struct{}{}
		}
	}
	m[key] = struct{}{}
	c.seen.Store(&m)
}
