package plugins

import (
	"context"

	"github.com/manifold-mcp/manifold/plugins/proto"
)

// auditQueue is the length of the audit_event queue; records beyond it
// are dropped and counted.
const auditQueue = 1024

// Audits reports whether some plugin of c implements audit_event.
func (c *Chain) Audits() bool {
	if c == nil {
		return false
	}
	for _, e := range c.entries {
		if e.in.covers(AuditEvent) && e.in.known.Load() != 0 {
			return true
		}
	}
	return false
}

// Audit hands record (one audit record, JSON) to the audit_event hooks of
// the plugins that implement one, asynchronously: it never blocks.
func (c *Chain) Audit(record []byte) {
	if c == nil {
		return
	}
	// A call that outlives Close finds the queue closed: its record is
	// dropped, not a panic.
	defer func() {
		if recover() != nil {
			c.host.auditDropped.Add(1)
		}
	}()
	select {
	case c.host.audit <- auditItem{chain: c, record: record}:
	default:
		c.host.auditDropped.Add(1)
	}
}

type auditItem struct {
	chain  *Chain
	record []byte
}

// auditLoop delivers audit records until the host closes.
func (h *Host) auditLoop() {
	defer close(h.auditDone)
	for it := range h.audit {
		for _, e := range it.chain.entries {
			if cur := e.in.cur.Load(); cur == nil || !cur.hookSet().has(AuditEvent) {
				continue
			}
			_, _ = h.call(context.Background(), e, AuditEvent, &proto.Context{}, it.record)
		}
	}
}

// AuditDropped returns how many audit records the plugins missed because
// the queue was full.
func (h *Host) AuditDropped() uint64 { return h.auditDropped.Load() }
