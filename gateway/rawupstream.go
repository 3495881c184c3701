package gateway

import (
	"encoding/json"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The per-request _meta of a 2026-07-28 upstream on the raw path. The
// SDK's client adds to each request it sends on that protocol the keys of
// SEP-2575 (protocolVersion, clientInfo, clientCapabilities), and the
// gateway the caller's log level (withLogLevel); a raw call carries the
// same, encoded once per upstream connection and version.

// hopMeta is the encoded per-request keys of one upstream, for version.
type hopMeta struct {
	version string
	members []byte
}

// capabilitiesV2 is the form of client capabilities on the wire since
// 2026-07-28 (the SDK's own is unexported): roots is a pointer.
type capabilitiesV2 struct {
	mcp.ClientCapabilities
	Roots *mcpx.RootCapabilities `json:"roots,omitempty"`
}

// upstreamMeta returns the _meta members a raw call to up carries, made by
// the client of ss: nothing for an upstream before 2026-07-28; else the
// SEP-2575 keys, as up's SDK client sends them, and ss's log level.
func (g *Gateway) upstreamMeta(up *upstream.Upstream, ss *mcp.ServerSession) []byte {
	version := upstreamVersion(up)
	if !mcpx.Stateless(version) {
		return nil
	}
	var members []byte
	if v, ok := g.flights.hop.Load(up); ok && v.(*hopMeta).version == version {
		members = v.(*hopMeta).members
	} else {
		members = g.encodeHopMeta(up, version)
		g.flights.hop.Store(up, &hopMeta{version: version, members: members})
	}
	if ss == nil {
		return members
	}
	if lv, ok := g.flights.levels.Load(ss); ok {
		out := make([]byte, 0, len(members)+48)
		out = append(out, members...)
		out = append(out, ',')
		out = envelope.AppendString(out, mcpx.MetaKeyLogLevel)
		out = append(out, ':')
		return envelope.AppendString(out, string(lv.(sessionLevel).level))
	}
	return members
}

// encodeHopMeta encodes the SEP-2575 keys of up: the capabilities it
// declared (relayCapabilities, or its client's for a per-client session)
// and the gateway's client info (upstreamOptions).
func (g *Gateway) encodeHopMeta(up *upstream.Upstream, version string) []byte {
	caps := relayCapabilities(up.Config())
	if d := g.perClient.dedicatedOf(up); d != nil {
		caps = clientRelayCapabilities(d.caps)
	}
	c, _ := json.Marshal(capabilitiesV2{ClientCapabilities: *caps, Roots: mcpx.RootsV2(caps)})
	info, _ := json.Marshal(&mcp.Implementation{Name: "manifold", Version: g.opts.Version})
	out := envelope.AppendString(nil, mcp.MetaKeyProtocolVersion)
	out = append(out, ':')
	out = envelope.AppendString(out, version)
	out = append(out, ',')
	out = envelope.AppendString(out, mcp.MetaKeyClientInfo)
	out = append(out, ':')
	out = append(out, info...)
	out = append(out, ',')
	out = envelope.AppendString(out, mcp.MetaKeyClientCapabilities)
	out = append(out, ':')
	return append(out, c...)
}
