package gateway

import (
	"net/http"

	"github.com/manifold-mcp/manifold/upstream"
)

// Paths of the health endpoints, served on the main listener without
// authentication (probes carry no token).
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
)

// Readiness states (Readiness.Status).
const (
	ReadyOK        = "ready"
	ReadyStarting  = "starting" // Start has not returned yet
	ReadyWaiting   = "waiting"  // a required upstream is not ready
	ReadyStopping  = "stopping" // shutdown has begun
	healthStatusOK = "ok"       // /healthz
)

// Readiness is the answer of GET /readyz. It names no server: the endpoint
// needs no authentication, and /status gives the details.
type Readiness struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	// Required counts the enabled servers marked required; RequiredReady
	// those of them connected now.
	Required      int `json:"required"`
	RequiredReady int `json:"requiredReady"`
}

// Readiness reports whether the gateway is ready for traffic: Start has
// returned (every upstream had its first connect attempt), shutdown has
// not begun, and every enabled server with required: true is connected.
// Servers not marked required never hold readiness back: the gateway
// serves the others while one is down.
func (g *Gateway) Readiness() Readiness {
	cfg := g.current().cfg
	var r Readiness
	for _, s := range cfg.Enabled() {
		if s.Required {
			r.Required++
		}
	}
	for _, up := range g.pool.serving() {
		if cfg.Servers[up.Name()].Required && up.Status().State == upstream.StateReady {
			r.RequiredReady++
		}
	}
	switch {
	case g.draining.Load() || g.life.Closed():
		r.Status = ReadyStopping
	case !g.started.Load():
		r.Status = ReadyStarting
	case r.RequiredReady < r.Required:
		r.Status = ReadyWaiting
	default:
		r.Status, r.Ready = ReadyOK, true
	}
	return r
}

// serveHealthz answers GET /healthz: 200 while the process serves HTTP.
func (g *Gateway) serveHealthz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{healthStatusOK})
}

// serveReadyz answers GET /readyz with Readiness: 200 when ready, else 503.
func (g *Gateway) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	rd := g.Readiness()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}

// probeMethod accepts GET and HEAD, and answers anything else with 405.
func probeMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "use GET", http.StatusMethodNotAllowed)
	return false
}
