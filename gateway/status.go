package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/manifold-mcp/manifold/plugins"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
)

// Status is the gateway's state, as GET /status reports it.
type Status struct {
	Version   string           `json:"version"`
	Config    ConfigStatus     `json:"config"`
	Reloads   ReloadStatus     `json:"reloads"`
	Upstreams []UpstreamStatus `json:"upstreams"`
	// Plugins are the hook plugins, running or not.
	Plugins []plugins.Status `json:"plugins,omitempty"`
	// Draining counts upstreams taken out of service by a reload that are
	// still finishing their calls, per-client sessions of a replaced server
	// included.
	Draining int `json:"draining"`
	Sessions int `json:"sessions"`
	// Subscriptions counts the resource subscriptions held on upstreams.
	Subscriptions int           `json:"subscriptions"`
	Process       ProcessStatus `json:"process"`
	// Catalog shows the overrides and toolsets in force (overrides.go).
	Catalog CatalogStatus `json:"catalog"`
}

// ConfigStatus names the config serving.
type ConfigStatus struct {
	Source   string    `json:"source"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loadedAt"`
}

// ReloadStatus counts reloads and shows the last attempt.
type ReloadStatus struct {
	Applied  int           `json:"applied"`
	Rejected int           `json:"rejected"`
	Last     *ReloadResult `json:"last,omitempty"`
}

// UpstreamStatus is one configured server: the upstream serving it and,
// while a reload replaces it, the replacement connecting.
type UpstreamStatus struct {
	upstream.Status
	InFlight    int              `json:"inFlight"`
	Replacement *upstream.Status `json:"replacement,omitempty"`
	// Session is the server's session mode; ClientSessions counts the
	// per-client upstream sessions open.
	Session        string `json:"session"`
	ClientSessions int    `json:"clientSessions,omitempty"`
}

// ProcessStatus is the gateway process's own footprint, for spotting leaks.
type ProcessStatus struct {
	PID        int `json:"pid"`
	Goroutines int `json:"goroutines"`
	// OpenFiles counts the process's file descriptors; -1 where unknown.
	OpenFiles int `json:"openFiles"`
}

// Status reports the gateway's state. With a principal, only the upstreams
// it may see something of are listed (a nil principal sees all).
func (g *Gateway) Status(pr *policy.Principal) *Status {
	snap := g.current()
	last, applied, rejected := g.LastReload()
	st := &Status{
		Version:       g.opts.Version,
		Config:        ConfigStatus{Source: snap.cfg.Source, Hash: snap.cfg.Hash, LoadedAt: snap.loaded},
		Reloads:       ReloadStatus{Applied: applied, Rejected: rejected, Last: last},
		Sessions:      g.sessionCount(),
		Subscriptions: g.subscriptionCount(),
		Process:       ProcessStatus{PID: os.Getpid(), Goroutines: runtime.NumGoroutine(), OpenFiles: openFiles()},
		Plugins:       g.plugins.Status(),
	}
	var visible map[string]bool
	if pr != nil && !snap.access.policy.Unrestricted() {
		visible = filterView(g.routes.Load(), snap.access.policy, pr).servers
	}
	st.Catalog = g.catalogStatus(snap, visible)
	clientSessions := g.perClient.countByBase()
	g.pool.mu.Lock()
	st.Draining = len(g.pool.draining)
	for _, up := range g.pool.serving() {
		if visible != nil && !visible[up.Name()] {
			continue
		}
		us := UpstreamStatus{Status: up.Status(), InFlight: up.InFlight(), Session: up.SessionMode(),
			ClientSessions: clientSessions[up]}
		if m := g.pool.members[up.Name()]; m != nil && m.next != nil {
			next := m.next.Status()
			us.Replacement = &next
		}
		st.Upstreams = append(st.Upstreams, us)
	}
	g.pool.mu.Unlock()
	return st
}

// openFiles counts the process's open file descriptors (Linux), or -1.
func openFiles() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

// serveStatus answers GET /status with Status as JSON, for the requesting
// principal.
func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	pr, _ := r.Context().Value(principalKey{}).(*policy.Principal)
	writeJSON(w, http.StatusOK, g.Status(pr))
}

// serveReload answers POST /reload: it reloads the config file now and
// reports the outcome (200 when applied or unchanged, 422 when rejected).
func (g *Gateway) serveReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	res, err := g.Reload(ctx, TriggerAPI)
	code := http.StatusOK
	if err != nil {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
