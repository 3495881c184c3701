package upstream

import (
	"encoding/json"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestMeta is RequestMeta's answer for one protocol version.
type requestMeta struct {
	version string
	members []byte
}

// RequestMeta returns the members that every request to the upstream
// carries in params._meta when the version negotiated with it is
// 2026-07-28 or later (SEP-2575: the protocol version, the client's
// implementation and its capabilities), as raw JSON members joined by
// commas; nil for older versions, or while never connected. They are what
// the SDK adds to its own requests on this connection, for a raw call
// (CallRaw), which sends its params as they are, to add the same. Computed
// once per negotiated version.
func (u *Upstream) RequestMeta() []byte {
	c := u.Catalog()
	if c == nil || !mcpx.Stateless(c.ProtocolVersion) {
		return nil
	}
	if m := u.reqMeta.Load(); m != nil && m.version == c.ProtocolVersion {
		return m.members
	}
	m := &requestMeta{version: c.ProtocolVersion, members: buildRequestMeta(c.ProtocolVersion, u.opts.ClientInfo, u.opts.Capabilities)}
	u.reqMeta.Store(m)
	return m.members
}

// buildRequestMeta encodes the per-request members for version. The
// capabilities take their 2026-07-28 form, where roots is the RootsV2
// pointer (absent when not declared) rather than the legacy value.
func buildRequestMeta(version string, info *mcp.Implementation, caps *mcp.ClientCapabilities) []byte {
	var c mcp.ClientCapabilities
	if caps != nil {
		c = *caps
	}
	v2 := struct {
		mcp.ClientCapabilities
		Roots *mcpx.RootCapabilities `json:"roots,omitempty"`
	}{ClientCapabilities: c, Roots: mcpx.RootsV2(&c)}
	capsJSON, err := json.Marshal(v2)
	if err != nil { // plain structs of the SDK: cannot fail
		panic(err)
	}
	b := []byte(`"` + mcp.MetaKeyProtocolVersion + `":`)
	b = envelope.AppendString(b, version)
	if info != nil {
		infoJSON, err := json.Marshal(info)
		if err != nil {
			panic(err)
		}
		b = append(b, `,"`+mcp.MetaKeyClientInfo+`":`...)
		b = append(b, infoJSON...)
	}
	b = append(b, `,"`+mcp.MetaKeyClientCapabilities+`":`...)
	return append(b, capsJSON...)
}
