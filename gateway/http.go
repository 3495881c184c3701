package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/rawio"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// readHeaderTimeout bounds reading a request's headers on the main
// listener.
const readHeaderTimeout = 10 * time.Second

// Handler returns the gateway's HTTP handler:
//
//	/mcp  streamable HTTP; requests whose MCP-Protocol-Version is 2026-07-28
//	      or later go to the SDK's stateless handler, older ones to the
//	      gateway's sessions (serveSessions)
//	/sse  legacy HTTP+SSE (2024-11-05); messages are POSTed to /sse?sessionid=…
//	/mcp/<toolset>, /sse/<toolset>
//	      the same, for a toolset of the config (toolsets.go); 404 for
//	      any other name
//	/.well-known/oauth-protected-resource[/mcp]
//	      OAuth protected resource metadata, when tokens come from an
//	      authorization server
//	/healthz, /readyz
//	      liveness and readiness (see Readiness), without authentication
//	/status, /reload, /ui/
//	      status, reload and the operator console: operators only
//
// wrapped in the request body deadline (bodyDeadline), Host/Origin checks
// (DNS rebinding), the message size limit, bearer authentication (when auth
// is on) and the session limits (clients.go).
func (g *Gateway) Handler() http.Handler {
	// The SDK fixes its options at construction; everything a reload may
	// change (limits, hosts, auth) is checked per request, from the current
	// snapshot, by the gateway's own handlers around it. Streamable HTTP
	// sessions are the gateway's own (streamable.go).
	getServer := func(*http.Request) *mcp.Server { return g.server }
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          -1,   // limitBody enforces the current limit
		DisableLocalhostProtection:   true, // checkHostOrigin does it, with allowedHosts
	})
	sse := mcp.NewSSEHandler(getServer, &mcp.SSEOptions{
		MaxRequestBodyBytes:        -1,
		DisableLocalhostProtection: true,
	})
	authn := newHTTPAuth(g)
	mux := http.NewServeMux()
	mux.HandleFunc(prmPath, g.protectedResource)
	mux.HandleFunc(prmPath+"/", g.protectedResource)
	serveMCP := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// A drain waits for the POST itself, not only for its method
			// handler: the transport writes the answer after the handler
			// returns, and closing the session before would cut it.
			g.inflight.Add()
			defer g.inflight.Done()
		}
		if mcpx.Stateless(r.Header.Get("Mcp-Protocol-Version")) {
			g.serveStateless(w, r, stateless)
			return
		}
		g.serveSessions(w, r)
	})
	serveSSE := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			// The stream, and with it the session, lasts as long as this
			// request; cancel ends it early (endClient).
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			cl, ok := g.openClient(w, r, kindSSE, cancel, "")
			if !ok {
				return
			}
			defer g.clients.remove(cl)
			if g.cluster != nil {
				_, p := principalOf(r)
				w = &sseTokens{ResponseWriter: w, g: g, p: p} // cluster.go
			}
			sse.ServeHTTP(w, r.WithContext(context.WithValue(ctx, clientKey{}, cl)))
			return
		}
		if g.cluster != nil && !g.clusterSSE(w, r) {
			return
		}
		sse.ServeHTTP(w, r)
	})
	mux.Handle("/mcp", authn.require(serveMCP))
	mux.Handle("/sse", authn.require(serveSSE))
	// The toolsets (toolsets.go): /mcp/<name> and /sse/<name>.
	mux.Handle("/mcp/", authn.require(g.toolsetPath("/mcp/", serveMCP)))
	mux.Handle("/sse/", authn.require(g.toolsetPath("/sse/", serveSSE)))
	mux.HandleFunc(healthzPath, g.serveHealthz)
	mux.HandleFunc(readyzPath, g.serveReadyz)
	mux.Handle("/status", g.loopbackHost(authn.admin(http.HandlerFunc(g.serveStatus))))
	mux.Handle("/reload", g.loopbackHost(authn.admin(http.HandlerFunc(g.serveReload))))
	mux.Handle("/oauth/", g.oauthHandler(false))    // upstream sign-in pages (oauthpages.go)
	mux.Handle("/ui/", g.loopbackHost(g.console())) // the operator console (console.go); checks its own access
	return g.bodyDeadline(g.checkHostOrigin(g.limitBody(mux)))
}

// loopbackHost wraps what trusts a loopback peer while auth is off (/status,
// /reload, the console): then the Host must name loopback or one of gateway.allowedHosts
// (allowHostOrigin), whatever the listener, since a page of another site
// that a local browser resolves to 127.0.0.1 (DNS rebinding) connects from
// loopback too.
func (g *Gateway) loopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.current().access.authn == nil && !g.allowHostOrigin(w, r, true) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionCount is the number of open downstream sessions, on every transport.
func (g *Gateway) sessionCount() int {
	n := 0
	for range g.server.Sessions() {
		n++
	}
	return n
}

// limitBody enforces gateway.limits.maxMessageBytes: 413 with an
// explanation when the declared body is over the limit, and a cut (413 from
// the SDK) when a body without a length runs over it.
func (g *Gateway) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		max := g.current().edge.maxBytes
		if r.ContentLength > max {
			http.Error(w, fmt.Sprintf("message of %d bytes exceeds the gateway's limit of %d bytes (gateway.limits.maxMessageBytes)", r.ContentLength, max), http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// checkHostOrigin protects the main listener against DNS rebinding and
// cross-site requests (see allowHostOrigin).
func (g *Gateway) checkHostOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.allowHostOrigin(w, r, g.current().edge.loopbackOnly) {
			next.ServeHTTP(w, r)
		}
	})
}

// allowHostOrigin reports whether r passes the Host and Origin checks,
// answering 403 itself when not. On a loopback listener (loopbackOnly) the
// Host header must name loopback or one of gateway.allowedHosts. A browser
// Origin must be the same host or listed in gateway.allowedOrigins.
func (g *Gateway) allowHostOrigin(w http.ResponseWriter, r *http.Request, loopbackOnly bool) bool {
	e := g.current().edge
	host := strings.ToLower(stripPort(r.Host))
	if loopbackOnly && !isLoopback(host) && !e.hosts[host] {
		g.log.Warn("request refused: Host not allowed", zap.String(keyName, r.Host))
		http.Error(w, fmt.Sprintf("Host %q is not allowed (DNS rebinding protection; see gateway.allowedHosts)", r.Host), http.StatusForbidden)
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" && !e.origins[strings.ToLower(origin)] {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			g.log.Warn("request refused: Origin not allowed", zap.String(keyName, origin))
			http.Error(w, fmt.Sprintf("Origin %q is not allowed (see gateway.allowedOrigins)", origin), http.StatusForbidden)
			return false
		}
	}
	return true
}

func stripPort(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]")
	}
	return strings.Trim(hostport, "[]")
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Serve serves Handler on ln (with TLS when gateway.tls is set) until ctx is
// done, then shuts down, letting requests in flight finish within the drain
// timeout. Request headers must arrive within readHeaderTimeout, bodies
// within gateway.timeouts.requestBody (bodyDeadline), and a keep-alive
// connection is closed after gateway.timeouts.idleConnection without a
// request. No timeout bounds a response: SSE streams last as long as their
// session. (http.Server.ReadTimeout is not used: it cannot be reloaded, and
// it would bound the headers and body together.)
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       g.current().cfg.Gateway.Timeouts.IdleConnection,
		ErrorLog:          zap.NewStdLog(g.log.Named("http")),
	}
	tls := g.current().cfg.Gateway.TLS
	ln = rawio.Listener{Listener: ln} // reads and writes without sysmon wake-ups (internal/rawio)
	errc := make(chan error, 1)
	go func() {
		if tls.CertFile != "" {
			errc <- srv.ServeTLS(ln, tls.CertFile, tls.KeyFile)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	g.oauth.served.Store(new(ln.Addr().String())) // the default base of sign-in links (oauthconsent.go)
	g.log.Info("serving", zap.String(keyAddr, ln.Addr().String()), zap.Bool("tls", tls.CertFile != ""))
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	g.draining.Store(true) // /readyz answers 503 while requests drain
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.current().cfg.Gateway.Timeouts.Drain)
	defer cancel()
	// Stop accepting, let the requests in flight finish within the drain
	// timeout, then close the sessions, cancelling the calls still in
	// flight (the SDK's Close waits for them): their long-lived streams
	// (SSE, GET) never end by themselves, and Shutdown waits for them.
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	g.waitIdle(sctx)
	for ss := range g.server.Sessions() {
		g.closeSession(ss, errShuttingDown)
	}
	err := <-shut
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// waitIdle returns when no request is being handled, or when ctx is done.
func (g *Gateway) waitIdle(ctx context.Context) {
	select {
	case <-g.inflight.Zero():
	case <-ctx.Done():
		g.log.Warn("drain timeout: requests still in flight are cut", zap.Int64("in_flight", g.inflight.Load()))
	}
}
