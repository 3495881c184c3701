package plugins

import (
	"encoding/json"
	"strings"

	"github.com/manifold-mcp/manifold/policy"
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
// the plugins that implement one and whose match covers it,
// asynchronously: it never blocks.
func (c *Chain) Audit(record []byte) {
	if c == nil {
		return
	}
	h := c.host
	h.auditMu.RLock()
	defer h.auditMu.RUnlock()
	if h.auditClosed { // a call that outlives Close
		h.auditDropped.Add(1)
		return
	}
	select {
	case h.audit <- auditItem{chain: c, record: record}:
	default:
		h.auditDropped.Add(1)
	}
}

type auditItem struct {
	chain  *Chain
	record []byte
}

// auditLoop delivers audit records until Close has closed the queue and
// it is empty; each record a plugin missed is counted as dropped.
func (h *Host) auditLoop() {
	defer close(h.auditDone)
	for it := range h.audit {
		if !h.deliver(it) {
			h.auditDropped.Add(1)
		}
	}
}

// deliver calls the audit_event hook of each plugin of it's chain that
// implements one and whose match covers the record; false when one of
// them missed it: down, failed, or Close gave up on delivery.
func (h *Host) deliver(it auditItem) bool {
	var t *Target
	ok := true
	for _, e := range it.chain.entries {
		if !e.in.covers(AuditEvent) || e.in.known.Load() == 0 {
			continue
		}
		if t == nil {
			t = auditTarget(it.record)
		}
		if !e.matches(t) {
			continue
		}
		if h.auditCtx.Err() != nil {
			ok = false
			continue
		}
		if _, err := h.call(h.auditCtx, e, AuditEvent, protoContext(t), it.record); err != nil {
			ok = false
		}
	}
	return ok
}

// auditTarget returns what an audit record names and who made it, for
// the plugins' match: a record that does not parse names nothing, so
// only plugins without a match get it.
func auditTarget(record []byte) *Target {
	var r struct {
		Method       string   `json:"method"`
		SessionID    string   `json:"session_id"`
		Principal    string   `json:"principal"`
		Groups       []string `json:"groups"`
		Server       string   `json:"server"`
		Name         string   `json:"name"`
		UpstreamName string   `json:"upstream_name"`
	}
	t := &Target{Kind: policy.Template} // a kind no call names
	if json.Unmarshal(record, &r) != nil {
		return t
	}
	switch {
	case strings.HasPrefix(r.Method, "tools/"):
		t.Kind = policy.Tool
	case strings.HasPrefix(r.Method, "prompts/"):
		t.Kind = policy.Prompt
	case strings.HasPrefix(r.Method, "resources/"):
		t.Kind = policy.Resource
	}
	t.Server, t.Name, t.Upstream, t.SessionID = r.Server, r.Name, r.UpstreamName, r.SessionID
	t.Principal = policy.NewPrincipal(r.Principal, r.Groups)
	return t
}

// AuditDropped returns how many audit records the plugins missed: the
// queue was full, a plugin was down or failed, or Close gave up on them.
func (h *Host) AuditDropped() uint64 { return h.auditDropped.Load() }
