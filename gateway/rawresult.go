package gateway

import "github.com/manifold-mcp/manifold/internal/envelope"

// statelessKeys are the members of a result statelessResult looks at.
var (
	statelessKeys  = []string{"resultType", "_meta"}
	serverInfoKeys = []string{metaServerInfo}
)

// statelessResult returns res, a result for a 2026-07-28 client, as the
// SDK's server makes every result of that protocol: with a resultType
// ("complete" unless the upstream set one, input_required included) and
// the gateway's serverInfo in its _meta (SEP-2575), where the upstream's
// is replaced. One allocation; a result whose keys are not simple is
// returned as it is (the upstream's own, already valid for the protocol).
func (g *Gateway) statelessResult(res []byte) []byte {
	var top [2]envelope.Span
	if envelope.Members(res, statelessKeys, top[:]) != nil {
		return res
	}
	var head []byte // members inserted after the result's opening brace
	if !top[0].Present() {
		head = append(head, `"resultType":"complete",`...)
	}
	var at envelope.Span // replaced by value, when present
	var value []byte
	switch meta := top[1]; {
	case !meta.Present():
		head = append(head, `"_meta":{"`+metaServerInfo+`":`...)
		head = append(append(head, g.serverInfo...), "},"...)
	default:
		var info [1]envelope.Span
		if envelope.Members(meta.In(res), serverInfoKeys, info[:]) != nil {
			return res
		}
		if info[0].Present() {
			at = envelope.Span{Start: meta.Start + info[0].Start, End: meta.Start + info[0].End}
			value = g.serverInfo
		} else {
			// The first member of _meta.
			at = envelope.Span{Start: meta.Start + 1, End: meta.Start + 1}
			value = append(append([]byte(`"`+metaServerInfo+`":`), g.serverInfo...), ',')
			if emptyObject(meta.In(res)) {
				value = value[:len(value)-1]
			}
		}
	}
	open := firstByte(res, '{') + 1
	if len(head) > 0 && emptyObject(res) {
		head = head[:len(head)-1] // no member follows
	}
	out := make([]byte, 0, len(res)+len(head)+len(value))
	out = append(out, res[:open]...)
	out = append(out, head...)
	if at.Present() {
		out = append(out, res[open:at.Start]...)
		out = append(out, value...)
		return append(out, res[at.End:]...)
	}
	return append(out, res[open:]...)
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
