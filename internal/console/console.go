// Package console serves Manifold's operator console: a small, read-only web UI under /ui on
// the gateway's main listener, with an Overview (upstreams, sessions, reloads), a Catalog
// (everything clients can see, and one principal's view with the policy rule behind each
// item) and the latest Audit records. Its pages are static files embedded in the binary; they
// fetch JSON from /ui/api/… and poll it for live updates, so the console works without any
// network beyond the gateway.
//
// The console knows nothing of the gateway: it is fed by a [Source], which the gateway
// implements. It decides who may see it (see [New]), keeps the sign-in sessions
// (sessions.go), and never renders a credential: pages show names, states and decisions, and
// the Source is expected to hand over nothing secret.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/manifold-mcp/manifold/internal/audit"
)

// Errors a Source's Authorize wraps.
var (
	// ErrUnauthenticated: the credential is missing, malformed, unknown or expired.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrForbidden: the credential is valid, but its principal is not an operator.
	ErrForbidden = errors.New("not an operator")
)

// Source is what the console shows, and how it checks credentials. The gateway implements it
// (gateway/console.go). Its methods are called concurrently, from HTTP handlers, and must
// return values the console may keep: nothing in them is modified afterwards. Nothing they
// return may hold a secret (API keys, tokens, header or environment values, URL credentials).
type Source interface {
	// AuthOff reports whether auth is off under the config serving now, and then the name of
	// the local principal, as which loopback clients use the console.
	AuthOff() (local string, off bool)
	// Authorize checks a bearer credential (an API key or a JWT) under the config serving
	// now and returns the operator it names, or an error wrapping ErrUnauthenticated or
	// ErrForbidden.
	Authorize(ctx context.Context, token string) (Operator, error)
	// Overview is the state of the upstreams, sessions and reloads.
	Overview() Overview
	// Principals are the principals the config names (API keys, the local principal), for
	// the catalog's principal selector.
	Principals() []Principal
	// Catalog is everything the gateway exposes, each item with pr's policy decision.
	Catalog(pr Principal) Catalog
}

// Options tunes a console. A nil *Options means the defaults.
type Options struct {
	// Audit is the ring of recent audit records the Audit page lists, and the Overview's
	// latency percentiles are computed from. Nil: the audit log is off, and those pages say so.
	Audit *audit.Ring
	// SessionTTL is how long a sign-in lasts; default 8h.
	SessionTTL time.Duration
	// MaxSessions bounds the signed-in sessions kept; at the limit the oldest is dropped.
	// Default 1000.
	MaxSessions int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HTTPClient talks to the OIDC issuer (discovery, token endpoint); nil means a client
	// with a 10s timeout.
	HTTPClient *http.Client
	// SecureCookies reports whether the console's cookies are Secure although a request came
	// without TLS: the browser reaches the gateway over https through a proxy that ends TLS
	// (the gateway's public URL is https). Nil: only requests over TLS get Secure cookies.
	SecureCookies func() bool
}

// Defaults of Options.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultMaxSessions = 1000
)

// auditPageSize is the most audit records one API answer holds.
const auditPageSize = 200

//go:embed assets
var assets embed.FS

// Console is the console's http.Handler. Build it with New.
type Console struct {
	src      Source
	ring     *audit.Ring
	sessions *sessions
	oidc     *oidcFlow
	mux      *http.ServeMux
	signIn   *template.Template
	next     *template.Template // a sign-in step: on to a link
	// secureCookies is Options.SecureCookies.
	secureCookies func() bool
}

// secure reports whether the cookies set in answer to r are Secure: r came over TLS, or
// the gateway is reached over https through a proxy (Options.SecureCookies).
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || c.secureCookies != nil && c.secureCookies()
}

// New returns the console, to be mounted at /ui/ on the gateway's main listener (never on
// one without the gateway's own checks, such as the metrics listener).
//
// Who may use it: while auth is off, loopback clients only, as the local principal; while
// auth is on, operators only, authenticated by an "Authorization: Bearer" header or by the
// session cookie the sign-in form (or the issuer's OIDC sign-in, oidc.go) sets. Without either it answers 401 (pages show the
// sign-in form), to a principal that is not an operator 403. Every GET is read-only; the two
// POSTs (sign in, sign out) are checked for a same-site origin by the gateway and here.
func New(src Source, opts *Options) *Console {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Console{
		src:           src,
		secureCookies: o.SecureCookies,
		ring:          o.Audit,
		sessions:      newSessions(o.MaxSessions, o.SessionTTL, o.Now),
		oidc:          newOIDCFlow(o.HTTPClient, o.Now),
		mux:           http.NewServeMux(),
		signIn:        template.Must(template.ParseFS(assets, "assets/signin.html")),
		next:          template.Must(template.ParseFS(assets, "assets/next.html")),
	}
	static, _ := fs.Sub(assets, "assets/static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	c.mux.Handle("GET /ui/static/", files) // no secret in them: served to anyone who may reach /ui
	c.mux.Handle("GET /ui/{$}", c.page(c.serveIndex))
	c.mux.Handle("GET /ui/api/me", c.api(c.serveMe))
	c.mux.Handle("GET /ui/api/overview", c.api(c.serveOverview))
	c.mux.Handle("GET /ui/api/catalog", c.api(c.serveCatalog))
	c.mux.Handle("GET /ui/api/audit", c.api(c.serveAudit))
	c.mux.HandleFunc("POST /ui/signin", c.serveSignIn)
	c.mux.HandleFunc("POST /ui/signout", c.serveSignOut)
	c.mux.HandleFunc("POST "+oidcPath+"/start", c.serveOIDCStart)
	c.mux.HandleFunc("GET "+oidcCallback, c.serveOIDCCallback)
	return c
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Scripts, styles and images come from the console itself; nothing may frame it.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes a form POST send Origin: null, which the gateway refuses
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// serveIndex serves the console's one page; its script shows the section the URL's fragment
// names.
func (c *Console) serveIndex(w http.ResponseWriter, r *http.Request, _ Operator) {
	http.ServeFileFS(w, r, assets, "assets/index.html")
}

// me is who uses the console, for its header.
type me struct {
	Operator string `json:"operator"`
	// SignedIn: by the session cookie (the page then offers to sign out).
	SignedIn bool `json:"signedIn"`
	AuthOff  bool `json:"authOff"`
	// Audit: the audit ring is on.
	Audit bool `json:"audit"`
}

func (c *Console) serveMe(w http.ResponseWriter, r *http.Request, op Operator) {
	writeJSON(w, me{Operator: op.Name, SignedIn: op.viaCookie, AuthOff: op.authOff, Audit: c.ring != nil})
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request, _ Operator) {
	ov := c.src.Overview()
	latencies(ov.Upstreams, c.ring)
	writeJSON(w, ov)
}

// catalogAnswer is the catalog with the principals to choose from.
type catalogAnswer struct {
	Catalog
	Principals []Principal `json:"principals"`
}

func (c *Console) serveCatalog(w http.ResponseWriter, r *http.Request, _ Operator) {
	q := r.URL.Query()
	pr := Principal{Name: q.Get("principal"), Groups: splitList(q.Get("groups"))}
	writeJSON(w, catalogAnswer{Catalog: c.src.Catalog(pr), Principals: c.src.Principals()})
}

// auditAnswer is a page of audit records.
type auditAnswer struct {
	On      bool          `json:"on"`
	Total   uint64        `json:"total"`
	Records []AuditRecord `json:"records"`
}

func (c *Console) serveAudit(w http.ResponseWriter, r *http.Request, _ Operator) {
	q := r.URL.Query()
	f := audit.Filter{Principal: q.Get("principal"), Server: q.Get("server"), Name: q.Get("name"), Outcome: q.Get("outcome")}
	limit := auditPageSize
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 && n < limit {
		limit = n
	}
	trace := q.Get("trace")
	ans := auditAnswer{On: c.ring != nil, Total: c.ring.Total(), Records: []AuditRecord{}}
	for _, e := range c.ring.Recent(f, 0) {
		if trace != "" && e.TraceID != trace {
			continue
		}
		ans.Records = append(ans.Records, auditRecord(e))
		if len(ans.Records) == limit {
			break
		}
	}
	writeJSON(w, ans)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
