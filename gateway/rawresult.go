package gateway

import "github.com/manifold-mcp/manifold/internal/envelope"

// statelessKeys are the members of a result statelessResult looks at.
var (
	statelessKeys  = []string{"resultType", "_meta"}
	serverInfoKeys = []string{metaServerInfo}
)

var (
	completeMember = []byte(`"resultType":"complete"`)
	comma          = []byte(",")
	metaOpen       = []byte(`"_meta":{"` + metaServerInfo + `":`)
	serverInfoKey  = []byte(`"` + metaServerInfo + `":`)
	closeBrace     = []byte("}")
)

// statelessResult adds to a res, a result for a 2026-07-28 client, as the
// SDK's server makes every result of that protocol: with a resultType
// ("complete" unless the upstream set one, input_required included) and
// the gateway's serverInfo in its _meta (SEP-2575), where the upstream's
// is replaced. It adds slices of res and a few constant pieces, never a
// copy of res; a result whose keys are not simple is added as it is (the
// upstream's own, valid for the protocol already).
func (g *Gateway) statelessResult(a *rawAnswer, res []byte) {
	var top [2]envelope.Span
	if envelope.Members(res, statelessKeys, top[:]) != nil {
		a.add(res)
		return
	}
	open := firstByte(res, '{') + 1
	a.add(res[:open])
	more := !emptyObject(res) // members follow what is inserted
	if !top[0].Present() {
		a.add(completeMember)
		if more || !top[1].Present() {
			a.add(comma)
		}
	}
	meta := top[1]
	if !meta.Present() {
		a.add(metaOpen)
		a.add(g.serverInfo)
		a.add(closeBrace)
		if more {
			a.add(comma)
		}
		a.add(res[open:])
		return
	}
	var info [1]envelope.Span
	if envelope.Members(meta.In(res), serverInfoKeys, info[:]) != nil {
		a.add(res[open:])
		return
	}
	if info[0].Present() { // the upstream's, replaced
		a.add(res[open : meta.Start+info[0].Start])
		a.add(g.serverInfo)
		a.add(res[meta.Start+info[0].End:])
		return
	}
	// The first member of _meta.
	a.add(res[open : meta.Start+1])
	a.add(serverInfoKey)
	a.add(g.serverInfo)
	if !emptyObject(meta.In(res)) {
		a.add(comma)
	}
	a.add(res[meta.Start+1:])
}

// firstByte returns the index of the first c in b (which holds one).
func firstByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}
