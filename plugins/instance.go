package plugins

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"github.com/manifold-mcp/manifold/plugins/sdk"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// ErrDown is the error of a hook call to a plugin that is not running.
var ErrDown = errors.New("plugin is not running")

// Backoff of restarts after a crash or a failed start.
const (
	backoffInitial = 100 * time.Millisecond
	backoffMax     = 5 * time.Second
	// stableAfter: a process that ran this long restarts at backoffInitial.
	stableAfter = 10 * time.Second
	// startTimeout bounds a start, handshake and Configure.
	startTimeout = 10 * time.Second
	// hungAfter hook calls in a row that reach the plugin's timeout mark
	// its process hung: it is killed and restarted.
	hungAfter = 3
	// killGrace bounds go-plugin's graceful stop of a process (its
	// Shutdown call has no deadline); then the process group is killed.
	killGrace = 3 * time.Second
)

// conn is one running process of a plugin and its gRPC client.
type conn struct {
	client *plugin.Client
	rpc    proto.PluginClient
	run    *procRunner
	// hooks is the manifest's hookSet; a reconfigure replaces it while
	// hook calls read it.
	hooks atomic.Uint32
	// calls is held for reading by each hook call on conn, and for
	// writing by drain, which so waits for them; closed (under calls) ends
	// new ones.
	calls  sync.RWMutex
	closed bool
	// timeouts counts the hook calls in a row that reached the timeout.
	timeouts atomic.Int32
}

// instance supervises one plugin: it keeps a process running (restarting
// it with backoff), sends it its config, and serves hook calls while it
// is up. Its methods are safe for concurrent use.
type instance struct {
	name string
	spec *spec
	log  *zap.Logger
	max  int64

	cfg atomic.Pointer[config.Plugin] // the config in force (Configure sent)
	cur atomic.Pointer[conn]          // nil while down
	// known is the manifest of the latest process that came up (0 before
	// any did): while down, the plugin still covers those hooks.
	known atomic.Uint32
	// state for Status.
	mu       sync.Mutex
	lastErr  string
	restarts int
	started  time.Time

	onUp      func() // called when a process with list_post comes up or goes (list caches)
	onRestart func() // counts restarts
	stop      chan struct{}
	stopped   chan struct{}
	// hung receives a conn found hung by its hook calls (see hungAfter).
	hung chan *conn
	// first is closed when the first start has succeeded or failed.
	first chan struct{}
	once  sync.Once
}

func newInstance(cfg *config.Plugin, s *spec, max int64, log *zap.Logger, onUp func()) *instance {
	in := &instance{name: cfg.Name, spec: s, log: log, max: max, onUp: onUp,
		stop: make(chan struct{}), stopped: make(chan struct{}), first: make(chan struct{}),
		hung: make(chan *conn, 1)}
	in.cfg.Store(cfg)
	return in
}

// supervise runs the plugin until stop: start, wait for its exit or for
// it to hang, restart with backoff.
func (in *instance) supervise() {
	defer close(in.stopped)
	delay := backoffInitial
	for {
		c, err := in.start()
		if err != nil {
			in.setErr(err)
			in.once.Do(func() { close(in.first) })
			in.log.Error("plugin failed to start", zap.Error(err))
		} else {
			began := time.Now()
			in.mu.Lock()
			in.lastErr, in.started = "", began
			in.mu.Unlock()
			in.known.Store(c.hooks.Load() | knownBit)
			in.cur.Store(c)
			in.once.Do(func() { close(in.first) })
			if in.onUp != nil && c.hookSet().has(ListPost) {
				in.onUp()
			}
			stopped, hung := in.wait(c)
			in.cur.Store(nil)
			if stopped {
				in.drain(c, false)
				return
			}
			if in.onUp != nil && c.hookSet().has(ListPost) {
				in.onUp() // what it covers is hidden or shown as its onError says
			}
			in.drain(c, hung)
			if hung {
				err := fmt.Errorf("plugin hung: %d hook calls in a row timed out", hungAfter)
				in.setErr(err)
				in.log.Warn("plugin killed; restarting", zap.Error(err))
			} else {
				in.setErr(errors.New("plugin process exited"))
				in.log.Warn("plugin process exited; restarting")
			}
			if time.Since(began) > stableAfter {
				delay = backoffInitial
			}
		}
		select {
		case <-in.stop:
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, backoffMax)
		in.mu.Lock()
		in.restarts++
		in.mu.Unlock()
		if in.onRestart != nil {
			in.onRestart()
		}
	}
}

// wait waits for stop, for c's process to exit, or for c to be found
// hung, and reports which of stop and hung it was.
func (in *instance) wait(c *conn) (stopped, hung bool) {
	for {
		select {
		case <-in.stop:
			return true, false
		case <-c.run.Exited():
			return false, false
		case h := <-in.hung:
			if h == c { // else a process already gone
				return false, true
			}
		}
	}
}

func (in *instance) setErr(err error) {
	in.mu.Lock()
	in.lastErr = err.Error()
	in.mu.Unlock()
}

// start starts one process, dispenses the hook service and configures it.
func (in *instance) start() (*conn, error) {
	var run *procRunner
	limit := int(in.max) + 64<<10
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{sdk.ProtocolVersion: {sdk.PluginName: &sdk.GRPCPlugin{}}},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     startTimeout,
		Logger:           hclogTo(in.log),
		SyncStdout:       lineWriter(in.log, "stdout"),
		SyncStderr:       lineWriter(in.log, "stderr"),
		GRPCDialOptions:  []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit))},
		RunnerFunc: func(_ hclog.Logger, cmd *exec.Cmd, _ string) (runner.Runner, error) {
			s := *in.spec
			s.env = append(slices.Clone(s.env), fmt.Sprintf("%s=%d", sdk.MaxMessageEnv, in.max))
			r, err := newRunner(&s, cmd)
			run = r
			return r, err
		},
	})
	fail := func(err error) (*conn, error) {
		stopClient(client, run)
		return nil, err
	}
	rpcc, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := rpcc.Dispense(sdk.PluginName)
	if err != nil {
		return fail(err)
	}
	pc, ok := raw.(proto.PluginClient)
	if !ok {
		return fail(fmt.Errorf("dispensed %T, not the hook service", raw))
	}
	c := &conn{client: client, rpc: pc, run: run}
	if err := in.configure(context.Background(), c, in.cfg.Load()); err != nil {
		return fail(err)
	}
	return c, nil
}

// configure sends cfg's config to c and records its manifest.
func (in *instance) configure(ctx context.Context, c *conn, cfg *config.Plugin) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	res, err := c.rpc.Configure(ctx, &proto.ConfigureRequest{Name: cfg.Name, Config: cfg.Config, MaxMessageBytes: in.max})
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	c.hooks.Store(uint32(parseHooks(res.GetHooks())))
	return nil
}

// hookSet returns the hooks c's manifest declares.
func (c *conn) hookSet() hookSet { return hookSet(c.hooks.Load()) }

// reconfigure sends a new config to the running process (no restart) and
// makes it the one in force; on error the previous one stays.
func (in *instance) reconfigure(ctx context.Context, cfg *config.Plugin) error {
	if c := in.cur.Load(); c != nil {
		if err := in.configure(ctx, c, cfg); err != nil {
			return err
		}
		in.known.Store(c.hooks.Load() | knownBit)
	}
	in.cfg.Store(cfg)
	return nil
}

// covers reports whether the plugin implements h: its running process's
// manifest, else the latest one's; a plugin that never came up covers
// every hook but list_post (whose failure would empty lists of a plugin
// that may not list at all).
func (in *instance) covers(h Hook) bool {
	if c := in.cur.Load(); c != nil {
		return c.hookSet().has(h)
	}
	k := in.known.Load()
	if k&knownBit == 0 {
		return h != ListPost
	}
	return hookSet(k).has(h)
}

// call runs one hook on the running process, within the plugin's timeout.
func (in *instance) call(ctx context.Context, req *proto.HookRequest) (*proto.HookResponse, error) {
	c := in.cur.Load()
	if c == nil {
		return nil, ErrDown
	}
	c.calls.RLock()
	defer c.calls.RUnlock()
	if c.closed {
		return nil, ErrDown
	}
	hctx, cancel := context.WithTimeout(ctx, in.cfg.Load().Timeout)
	defer cancel()
	res, err := c.rpc.Hook(hctx, req)
	switch {
	case err == nil || hctx.Err() == nil:
		c.timeouts.Store(0) // it answered
	case ctx.Err() == nil: // the plugin's timeout, not the caller's
		if c.timeouts.Add(1) >= hungAfter {
			select {
			case in.hung <- c:
			default: // already reported
			}
		}
	}
	return res, err
}

// ping checks that the process answers, within d: go-plugin's Ping has
// no deadline of its own.
func (in *instance) ping(d time.Duration) error {
	c := in.cur.Load()
	if c == nil {
		return ErrDown
	}
	cp, err := c.client.Client()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cp.Ping() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("ping: no answer within %s", d)
	}
}

// drain waits for the hook calls in flight on c (each bounded by the
// timeout), then stops its process (stopClient). A hung process is
// killed first, so that its calls in flight fail at once.
func (in *instance) drain(c *conn, hung bool) {
	if hung {
		_ = c.run.Kill(context.Background())
	}
	c.calls.Lock()
	c.closed = true
	c.calls.Unlock()
	stopClient(c.client, c.run)
}

// stopClient stops client's process and waits for it. go-plugin's Kill
// first asks the plugin to shut down, without a deadline: a process that
// does not answer would block it for good. So after killGrace run (nil
// before the process started) kills the process group, which also ends
// that Kill.
func stopClient(client *plugin.Client, run *procRunner) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		client.Kill()
	}()
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	if run != nil {
		_ = run.Kill(context.Background())
	}
	<-done
}

// close stops supervising and stops the process after its calls drained.
func (in *instance) close() {
	close(in.stop)
	<-in.stopped
}

// waitFirst waits for the first start to succeed or fail, or ctx.
func (in *instance) waitFirst(ctx context.Context) {
	select {
	case <-in.first:
	case <-ctx.Done():
	}
}
