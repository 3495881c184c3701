package gateway

// authenticate is the authenticate stage of the call pipeline: it resolves
// who sent the call (callerOf: the credential it came with, or the local
// principal) to a principal under the call's snapshot, once for the whole
// call. It refuses nothing: a caller without a principal is refused by the
// policy stage, which answers as for an unknown name.
func (g *Gateway) authenticate(c *call, who caller) {
	c.principal, c.known = who.principal(c.snap.access)
}
