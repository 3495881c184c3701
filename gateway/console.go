package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/console"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
)

// console returns the operator console's handler (internal/console), fed
// by the gateway through consoleSource, with the audit log's ring of recent
// records. It is mounted on the main listener only: the console checks who
// may use it (loopback while auth is off, operators while it is on).
func (g *Gateway) console() http.Handler {
	return console.New(consoleSource{g}, &console.Options{Audit: g.obs.audit.Ring(), SecureCookies: g.secureCookies})
}

// consoleSource is what the console shows of the gateway. It hands over
// names, states and decisions only: no credential, header, environment
// value or URL of an upstream, and error texts with URL credentials
// redacted.
type consoleSource struct{ g *Gateway }

var (
	_ console.Source     = consoleSource{}
	_ console.OIDCSource = consoleSource{}
)

// AuthOff reports whether auth is off, and the local principal's name.
func (s consoleSource) AuthOff() (string, bool) {
	a := s.g.current().access
	return a.local.Name(), a.authn == nil
}

// Authorize checks token under the config serving now, as admin does.
func (s consoleSource) Authorize(ctx context.Context, token string) (console.Operator, error) {
	a := s.g.current().access
	if a.authn == nil {
		return console.Operator{}, fmt.Errorf("%w: auth is off", console.ErrUnauthenticated)
	}
	id, err := a.authn.Authenticate(ctx, token)
	if err != nil {
		reason := "invalid token"
		if errors.Is(err, authn.ErrInvalidToken) {
			reason = err.Error()
		}
		return console.Operator{}, fmt.Errorf("%w: %s", console.ErrUnauthenticated, reason)
	}
	if !a.operators.Contains(id.Principal) {
		return console.Operator{}, fmt.Errorf("%w: %s", console.ErrForbidden, id.Principal.Name())
	}
	return console.Operator{Name: id.Principal.Name()}, nil
}

// Overview reports Status, for every upstream, with what the console adds:
// protocol versions, catalog sizes, sessions by client, reload history.
func (s consoleSource) Overview() console.Overview {
	g := s.g
	st := g.Status(nil)
	ov := console.Overview{
		Version:         st.Version,
		Config:          console.Config{Source: st.Config.Source, Hash: st.Config.Hash, LoadedAt: st.Config.LoadedAt},
		Draining:        st.Draining,
		ReloadsApplied:  st.Reloads.Applied,
		ReloadsRejected: st.Reloads.Rejected,
		AuditDropped:    g.obs.audit.Dropped(),
		Process:         console.Process{PID: st.Process.PID, Goroutines: st.Process.Goroutines, OpenFiles: st.Process.OpenFiles},
		Upstreams:       []console.Upstream{},
		Sessions:        []console.Session{},
		Reloads:         []console.Reload{},
	}
	byName := g.routes.Load().byName
	for _, u := range st.Upstreams {
		cu := console.Upstream{
			Name: u.Name, State: string(u.State), Since: u.Since, Transport: u.Transport, PID: u.PID,
			Restarts: u.Restarts, LastError: redact.Text(u.Error), InFlight: u.InFlight, Session: u.Session,
			ClientSessions: u.ClientSessions,
		}
		if u.Replacement != nil {
			cu.Replacing = string(u.Replacement.State)
		}
		if up := byName[u.Name]; up != nil {
			if cat := up.Catalog(); cat != nil {
				cu.ProtocolVersion = cat.ProtocolVersion
				cu.Tools, cu.Prompts, cu.Resources = len(cat.Tools), len(cat.Prompts), len(cat.Resources)
			}
		}
		ov.Upstreams = append(ov.Upstreams, cu)
	}
	slices.SortFunc(ov.Upstreams, func(a, b console.Upstream) int { return cmp.Compare(a.Name, b.Name) })
	counts := map[console.Session]int{}
	for ss := range g.server.Sessions() {
		ov.SessionCount++
		var k console.Session
		if ip := ss.InitializeParams(); ip != nil {
			k.ProtocolVersion = ip.ProtocolVersion
			if ip.ClientInfo != nil {
				k.Client = ip.ClientInfo.Name
			}
		}
		counts[k]++
	}
	for k, n := range counts {
		k.Count = n
		ov.Sessions = append(ov.Sessions, k)
	}
	slices.SortFunc(ov.Sessions, func(a, b console.Session) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), cmp.Compare(a.ProtocolVersion, b.ProtocolVersion))
	})
	for _, r := range g.reloadAttempts() {
		cr := console.Reload{At: r.At, Trigger: r.Trigger, Result: r.Result, DurationMS: r.DurationMS,
			Error: redact.Text(r.Error), Hash: r.Hash}
		for _, p := range r.Problems {
			cr.Problems = append(cr.Problems, redact.Text(p))
		}
		ov.Reloads = append(ov.Reloads, cr)
	}
	return ov
}

// Principals lists the principals the config names: the local one and
// those of the API keys (JWT subjects are typed into the console).
func (s consoleSource) Principals() []console.Principal {
	cfg := s.g.current().cfg
	out := []console.Principal{{Name: cfg.Auth.Local.Name, Groups: cfg.Auth.Local.Groups}}
	seen := map[string]bool{cfg.Auth.Local.Name: true}
	for _, k := range cfg.Auth.APIKeys {
		if !seen[k.Name] {
			seen[k.Name] = true
			out = append(out, console.Principal{Name: k.Name, Groups: k.Groups})
		}
	}
	return out
}

// Catalog lists every exposed item with pr's decision under the policy
// serving now, explained by the policy itself (policy.Describe). Without a
// principal every item is listed as visible, undecided.
func (s consoleSource) Catalog(pr console.Principal) console.Catalog {
	r, a := s.g.routes.Load(), s.g.current().access
	cat := console.Catalog{Principal: pr, Unrestricted: a.policy.Unrestricted(), Items: []console.Item{}}
	var who *policy.Principal
	if pr.Name != "" {
		who = policy.NewPrincipal(pr.Name, pr.Groups)
	}
	add := func(kind policy.Kind, name, upstreamName, server, title string) {
		it := console.Item{Kind: kind.String(), Name: name, Upstream: upstreamName, Server: server, Title: title, Visible: true}
		if who != nil {
			d := a.policy.Decide(who, kind, name, server)
			it.Visible, it.Rule = d.Allowed, a.policy.Describe(d)
		}
		cat.Items = append(cat.Items, it)
	}
	for _, t := range r.toolDefs {
		rt := r.tools[t.Name]
		add(policy.Tool, t.Name, rt.original, rt.up.Name(), t.Title)
	}
	for _, p := range r.promptDefs {
		rt := r.prompts[p.Name]
		add(policy.Prompt, p.Name, rt.original, rt.up.Name(), p.Title)
	}
	for _, res := range r.resourceDefs {
		original := res.URI
		if rt, ok := r.resource(res.URI); ok {
			original = rt.original
		}
		add(policy.Resource, res.URI, original, r.resourceServer[res.URI], res.Title)
	}
	for _, t := range r.templateDefs {
		original := t.URITemplate
		if _, o, ok := namespacing.UnwrapURI(t.URITemplate); ok {
			original = o
		}
		add(policy.Template, t.URITemplate, original, r.templateServer[t.URITemplate], t.Title)
	}
	return cat
}

// OIDC returns the console's OIDC sign-in at the JWT issuer
// (auth.jwt.oidc), if on.
func (s consoleSource) OIDC() (console.OIDC, bool) {
	j := s.g.current().cfg.Auth.JWT
	if j == nil || !j.OIDC.Enabled() {
		return console.OIDC{}, false
	}
	o := j.OIDC
	return console.OIDC{Issuer: j.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes, RedirectURL: o.RedirectURL}, true
}
