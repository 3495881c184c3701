// Package plugins is the host side of Manifold's hook plugins
// (docs/architecture.md, Plugins): it starts each configured plugin as a
// separate process through hashicorp/go-plugin (gRPC, AutoMTLS), keeps it
// running (restart with backoff, health checks), applies reloads (a new
// config is re-sent without a restart; a new binary is started beside the
// old one, checked, swapped in, and the old one drained), and runs the hook
// chain the gateway's call pipeline calls (chain.go). It knows nothing of
// MCP sessions or routing: the gateway hands it names and raw JSON.
package plugins

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// pingTimeout bounds the health check of a new process before a swap.
const pingTimeout = time.Second

// Options configures a Host. The zero value of each field is its default.
type Options struct {
	// Logger is the root logger; each plugin logs under "plugin.<name>".
	// Nil: no-op.
	Logger *zap.Logger
	// Executable is the manifold binary: builtins run as `Executable plugin
	// NAME`. Empty: builtins cannot start.
	Executable string
	// GuardPath is the manifold binary run as `upstream-guard` around each
	// plugin, so that it dies with the gateway. Empty: no guard.
	GuardPath string
	// Tracer starts a span per hook call; nil: none.
	Tracer trace.Tracer
	// Meter records hook latency, errors and restarts; nil: none.
	Meter metric.Meter
	// OnListChange is called when what list_post hooks answer may have
	// changed (a plugin came up, its config changed, one was added or
	// removed): the gateway drops its cached lists and sends list_changed.
	OnListChange func()
}

// Host runs the plugins of the config in force. Create it with New, Apply
// each config (at start and on every reload), read the Chain per call,
// and Close it.
type Host struct {
	opts    Options
	log     *zap.Logger
	metrics *metrics

	mu      sync.Mutex // serialises Apply and Close
	running map[string]*instance
	chain   atomic.Pointer[Chain]
	wg      sync.WaitGroup // drains of replaced instances
	closed  bool           // by Close, under mu: Apply starts nothing more

	// audit feeds auditLoop, which New starts and Close ends; auditMu
	// orders Chain.Audit's sends before Close closes it (auditClosed).
	auditMu     sync.RWMutex
	audit       chan auditItem
	auditClosed bool
	// auditCtx bounds the deliveries; Close cancels it when its own
	// context ends before the queue is delivered.
	auditCtx     context.Context
	auditCancel  context.CancelFunc
	auditDone    chan struct{}
	auditDropped atomic.Uint64
	// retired is closed when the first Close has retired every plugin.
	retired chan struct{}
}

// New returns a Host that runs nothing yet.
func New(opts *Options) *Host {
	h := &Host{running: map[string]*instance{}, retired: make(chan struct{})}
	if opts != nil {
		h.opts = *opts
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = zap.NewNop()
	}
	h.metrics = newMetrics(h.opts.Meter)
	h.audit, h.auditDone = make(chan auditItem, auditQueue), make(chan struct{})
	h.auditCtx, h.auditCancel = context.WithCancel(context.Background())
	go h.auditLoop()
	return h
}

// Chain returns the hook chain in force; nil when no plugin is configured.
func (h *Host) Chain() *Chain {
	if h == nil {
		return nil
	}
	return h.chain.Load()
}

// Apply makes list the plugins in force: plugins new to it are started
// (Apply waits for their first start, which may fail: the failure is
// logged and reported in Status, and the gateway serves on), removed
// ones are drained and stopped, a plugin whose config alone changed gets
// it without a restart, and one whose binary or checksum changed is
// started anew, health-checked and swapped in, its old process drained.
// maxMessageBytes sizes the gRPC message limits on both sides. After
// Close, Apply does nothing.
func (h *Host) Apply(ctx context.Context, list []config.Plugin, maxMessageBytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	next := make(map[string]*instance, len(list))
	var fresh []*instance
	listChanged := false
	for i := range list {
		cfg := &list[i]
		s := h.specOf(cfg)
		old := h.running[cfg.Name]
		if old != nil && sameSpec(old.spec, s) && old.max == maxMessageBytes {
			prev := old.cfg.Load()
			if !bytes.Equal(prev.Config, cfg.Config) {
				if err := old.reconfigure(ctx, cfg); err != nil {
					old.log.Error("plugin refused its new config; it keeps the previous one", zap.Error(err))
					kept := *cfg
					kept.Config = prev.Config
					old.cfg.Store(&kept)
				}
				listChanged = true
			} else {
				old.cfg.Store(cfg)
			}
			next[cfg.Name] = old
			continue
		}
		in := h.newInstance(cfg, s, maxMessageBytes)
		fresh = append(fresh, in)
		next[cfg.Name] = in
		listChanged = true
	}
	for _, in := range fresh {
		go in.supervise()
	}
	for _, in := range fresh {
		in.waitFirst(ctx)
		old := h.running[in.name]
		if old == nil {
			continue
		}
		// A replacement: swap only to a process that answers.
		if err := in.ping(pingTimeout); err != nil {
			in.log.Error("new plugin process failed its health check; keeping the running one", zap.Error(err))
			h.retire(in)
			next[in.name] = old
			// The old process runs on with the config it was sent: a
			// later reload with the new one sends it.
			kept := *in.cfg.Load()
			kept.Config = old.cfg.Load().Config
			old.cfg.Store(&kept)
			continue
		}
	}
	for name, old := range h.running {
		if next[name] != old {
			h.retire(old)
		}
	}
	h.running = next
	h.chain.Store(newChain(list, next, h))
	if listChanged && h.opts.OnListChange != nil {
		h.opts.OnListChange()
	}
}

// retire drains and stops in in the background; Close waits for it.
func (h *Host) retire(in *instance) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		in.close()
	}()
}

func (h *Host) newInstance(cfg *config.Plugin, s *spec, max int64) *instance {
	log := h.log.Named("plugin." + cfg.Name).With(zap.String("plugin", cfg.Name))
	in := newInstance(cfg, s, max, log, func() {
		if h.opts.OnListChange != nil {
			h.opts.OnListChange()
		}
	})
	in.onRestart = func() { h.metrics.restart(cfg.Name) }
	return in
}

// specOf returns how cfg's process starts.
func (h *Host) specOf(cfg *config.Plugin) *spec {
	s := &spec{guard: h.opts.GuardPath}
	if cfg.Builtin != "" {
		s.path, s.args = h.opts.Executable, []string{"plugin", cfg.Builtin}
	} else {
		s.path, s.args, s.want = cfg.Command[0], cfg.Command[1:], cfg.SHA256
		if p, err := exec.LookPath(s.path); err == nil {
			s.path = p
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		s.env = append(s.env, k+"="+cfg.Env[k])
	}
	return s
}

func sameSpec(a, b *spec) bool {
	return a.path == b.path && a.want == b.want && a.guard == b.guard &&
		slices.Equal(a.args, b.args) && slices.Equal(a.env, b.env)
}

// Status is one plugin's state, for /status.
type Status struct {
	Name     string   `json:"name"`
	Up       bool     `json:"up"`
	PID      string   `json:"pid,omitempty"`
	Hooks    []string `json:"hooks,omitempty"`
	Restarts int      `json:"restarts"`
	Error    string   `json:"error,omitempty"`
}

// Status returns the state of every plugin, by name.
func (h *Host) Status() []Status {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	ins := slices.Collect(maps.Values(h.running))
	h.mu.Unlock()
	out := make([]Status, 0, len(ins))
	for _, in := range ins {
		st := Status{Name: in.name}
		if c := in.cur.Load(); c != nil {
			st.Up, st.PID = true, c.run.ID()
			for hk := range numHooks {
				if c.hookSet().has(hk) {
					st.Hooks = append(st.Hooks, hk.String())
				}
			}
		}
		in.mu.Lock()
		st.Restarts, st.Error = in.restarts, in.lastErr
		in.mu.Unlock()
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close delivers the audit records queued for the plugins (those ctx
// leaves undelivered are counted in AuditDropped), then stops every
// plugin, each after its hook calls in flight drained. Apply does nothing
// after Close.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	running := h.running
	h.running = map[string]*instance{}
	h.chain.Store(nil)
	first := !h.closed
	h.closed = true
	h.mu.Unlock()
	if first {
		h.auditMu.Lock()
		h.auditClosed = true
		close(h.audit)
		h.auditMu.Unlock()
		select {
		case <-h.auditDone:
		case <-ctx.Done():
		}
		h.auditCancel() // what is left is dropped
		for _, in := range running {
			h.retire(in)
		}
		close(h.retired)
	}
	done := make(chan struct{})
	go func() {
		<-h.retired // a later Close waits for the first's retires too
		h.wg.Wait()
		<-h.auditDone
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("plugins: stopping: %w", ctx.Err())
	}
}
