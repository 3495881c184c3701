package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"github.com/manifold-mcp/manifold/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Chain is the hook chain of one Apply: the plugins in priority order with
// their compiled matches. It is immutable; a call reads it once.
type Chain struct {
	entries []*entry
	host    *Host
	// lists: some plugin may implement list_post.
	lists bool
}

// entry is one plugin in a chain.
type entry struct {
	cfg        *config.Plugin
	in         *instance
	servers    []policy.Pattern
	names      [3][]policy.Pattern // by kind: tool, prompt, resource
	byKind     bool                // some of names is non-empty
	principals policy.Principals
	anyone     bool // no principals listed
}

func newChain(list []config.Plugin, running map[string]*instance, h *Host) *Chain {
	if len(list) == 0 {
		return nil
	}
	c := &Chain{host: h, lists: true}
	for i := range list {
		cfg := &list[i]
		e := &entry{cfg: cfg, in: running[cfg.Name], servers: compile(cfg.Match.Servers)}
		e.names[0], e.names[1], e.names[2] = compile(cfg.Match.Tools), compile(cfg.Match.Prompts), compile(cfg.Match.Resources)
		e.byKind = len(e.names[0])+len(e.names[1])+len(e.names[2]) > 0
		e.principals, e.anyone = policy.CompilePrincipals(cfg.Match.Principals), len(cfg.Match.Principals) == 0
		c.entries = append(c.entries, e)
	}
	sort.SliceStable(c.entries, func(i, j int) bool { return c.entries[i].cfg.Priority < c.entries[j].cfg.Priority })
	return c
}

func compile(globs []string) []policy.Pattern {
	out := make([]policy.Pattern, len(globs))
	for i, g := range globs {
		out[i] = policy.CompilePattern(g)
	}
	return out
}

func anyMatch(ps []policy.Pattern, s string) bool {
	for _, p := range ps {
		if p.Match(s) {
			return true
		}
	}
	return false
}

// Target is what a call names and who makes it.
type Target struct {
	Kind policy.Kind
	// Server is the upstream's name; Name the tool or prompt name or URI
	// as the client knows it, Upstream as the upstream does.
	Server, Name, Upstream string
	Principal              *policy.Principal
	SessionID              string
	Traceparent            string
}

// matches reports whether e covers t.
func (e *entry) matches(t *Target) bool {
	if len(e.servers) > 0 && !anyMatch(e.servers, t.Server) {
		return false
	}
	if e.byKind {
		k := t.Kind.CallIndex()
		if k < 0 || !anyMatch(e.names[k], t.Name) {
			return false
		}
	}
	if !e.anyone && !e.principals.Contains(t.Principal) {
		return false
	}
	return true
}

// Covers reports whether some plugin of c matches t: a call no plugin
// matches skips the hook stages at the cost of this check.
func (c *Chain) Covers(t *Target) bool {
	if c == nil {
		return false
	}
	for _, e := range c.entries {
		if e.matches(t) {
			return true
		}
	}
	return false
}

// Decision is what one plugin did to one call, for the audit record.
type Decision struct {
	Plugin string           `json:"plugin"`
	Hook   string           `json:"hook"`
	Action string           `json:"action"` // continue, modify, block, respond, error
	Rule   string           `json:"rule,omitempty"`
	Reason string           `json:"reason,omitempty"`
	Counts map[string]int64 `json:"counts,omitempty"`
	// Observed: the plugin is in observe mode and nothing was applied.
	Observed bool   `json:"observed,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Outcome is what the hooks of one stage made of a payload.
type Outcome struct {
	// Payload is the payload to use: the one given unless Changed.
	Payload []byte
	Changed bool
	// Respond (pre hooks): Payload is the call's result; skip the upstream.
	Respond   bool
	Decisions []Decision
}

// Sentinel errors of the hook stages.
var (
	// ErrBlocked is matched by a *BlockedError.
	ErrBlocked = errors.New("blocked by plugin")
)

// BlockedError is the error of a call a plugin blocked, or that a
// fail-closed plugin could not decide on.
type BlockedError struct {
	Plugin, Reason string
	// Unavailable: the plugin erred, timed out or is down (fail-closed).
	Unavailable bool
}

func (e *BlockedError) Error() string {
	if e.Unavailable {
		return fmt.Sprintf("plugin %q is unavailable (fail-closed): %s", e.Plugin, e.Reason)
	}
	return fmt.Sprintf("blocked by plugin %q: %s", e.Plugin, e.Reason)
}

func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// preHooks and postHooks are the hooks of each kind's stages.
var (
	preHooks  = [3]Hook{ToolPreCall, PromptPreGet, ResourcePreRead}
	postHooks = [3]Hook{ToolPostCall, PromptPostGet, ResourcePostRead}
)

// Pre runs the pre hooks of t's kind on payload (the arguments, or a
// read's params), in priority order: each sees the previous one's
// payload. A block ends the chain with a *BlockedError.
func (c *Chain) Pre(ctx context.Context, t *Target, payload []byte) (Outcome, error) {
	k := t.Kind.CallIndex()
	if c == nil || k < 0 {
		return Outcome{Payload: payload}, nil
	}
	return c.run(ctx, preHooks[k], t, payload, true)
}

// Post runs the post hooks of t's kind on payload, the call's result.
func (c *Chain) Post(ctx context.Context, t *Target, payload []byte) (Outcome, error) {
	k := t.Kind.CallIndex()
	if c == nil || k < 0 {
		return Outcome{Payload: payload}, nil
	}
	return c.run(ctx, postHooks[k], t, payload, false)
}

func (c *Chain) run(ctx context.Context, hook Hook, t *Target, payload []byte, pre bool) (Outcome, error) {
	out := Outcome{Payload: payload}
	var pc *proto.Context
	for _, e := range c.entries {
		if !e.matches(t) {
			continue
		}
		if !e.in.covers(hook) {
			continue
		}
		if pc == nil {
			pc = protoContext(t)
		}
		res, err := c.host.call(ctx, e, hook, pc, out.Payload)
		cfg := e.in.cfg.Load()
		observe := cfg.Mode == config.PluginObserve
		d := Decision{Plugin: e.cfg.Name, Hook: hook.String(), Observed: observe}
		if err != nil {
			d.Action, d.Error = "error", err.Error()
			out.Decisions = append(out.Decisions, d)
			if cfg.OnError == config.PluginFailClosed && !observe {
				return out, &BlockedError{Plugin: e.cfg.Name, Reason: err.Error(), Unavailable: true}
			}
			continue
		}
		d.Rule, d.Reason, d.Counts = res.GetRule(), res.GetReason(), res.GetCounts()
		switch res.GetAction() {
		case proto.HookResponse_CONTINUE:
			d.Action = "continue"
		case proto.HookResponse_MODIFY:
			d.Action = "modify"
			if !observe {
				if !json.Valid(res.GetPayload()) {
					d.Action, d.Error = "error", "modified payload is not valid JSON"
					break
				}
				out.Payload, out.Changed = res.GetPayload(), true
			}
		case proto.HookResponse_BLOCK:
			d.Action = "block"
			if !observe {
				out.Decisions = append(out.Decisions, d)
				return out, &BlockedError{Plugin: e.cfg.Name, Reason: res.GetReason()}
			}
		case proto.HookResponse_RESPOND:
			d.Action = "respond"
			if pre && !observe {
				if !json.Valid(res.GetPayload()) {
					d.Action, d.Error = "error", "response payload is not valid JSON"
					break
				}
				out.Decisions = append(out.Decisions, d)
				out.Payload, out.Changed, out.Respond = res.GetPayload(), true, true
				return out, nil
			}
		default:
			d.Action = "error"
			d.Error = fmt.Sprintf("unknown action %d", res.GetAction())
		}
		// An answer that cannot be used is the plugin failing: fail-closed
		// stops the call, as an error of the call itself does.
		if d.Action == "error" && cfg.OnError == config.PluginFailClosed && !observe {
			out.Decisions = append(out.Decisions, d)
			return out, &BlockedError{Plugin: e.cfg.Name, Reason: d.Error, Unavailable: true}
		}
		if observe && d.Action != "continue" {
			e.in.log.Info("observe mode: plugin would have acted", zap.String("hook", d.Hook), zap.String("action", d.Action), zap.String("rule", d.Rule))
		}
		out.Decisions = append(out.Decisions, d)
	}
	return out, nil
}

// call runs one hook on e's plugin with a span and metrics.
func (h *Host) call(ctx context.Context, e *entry, hook Hook, pc *proto.Context, payload []byte) (*proto.HookResponse, error) {
	start := time.Now()
	var span trace.Span
	if h.opts.Tracer != nil {
		ctx, span = h.opts.Tracer.Start(ctx, "plugin "+hook.String(), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("manifold.plugin", e.cfg.Name), attribute.String("manifold.plugin.hook", hook.String())))
	}
	res, err := e.in.call(ctx, &proto.HookRequest{Hook: hook.String(), Context: pc, Payload: payload})
	h.metrics.hook(ctx, e.cfg.Name, hook, time.Since(start), err)
	if span != nil {
		outcome := "error"
		if err == nil {
			outcome = res.GetAction().String()
		} else {
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("manifold.plugin.outcome", outcome))
		span.End()
	}
	return res, err
}

func protoContext(t *Target) *proto.Context {
	pc := &proto.Context{Server: t.Server, Name: t.Name, UpstreamName: t.Upstream, SessionId: t.SessionID, Traceparent: t.Traceparent}
	if t.Principal != nil {
		pc.Principal, pc.Groups = t.Principal.Name(), t.Principal.Groups()
	}
	return pc
}
