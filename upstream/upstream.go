// Package upstream holds one supervised MCP client per configured server:
// it connects (stdio subprocess, streamable HTTP or legacy SSE), initializes,
// caches the server's tools, prompts, resources and templates with full
// pagination, refreshes them on list_changed (debounced), restarts the
// connection with backoff when it fails, and stops the server gracefully
// (stdio: close stdin, wait, SIGTERM, SIGKILL to its whole process group).
//
// It knows nothing of namespaces or policy: the gateway reads each
// upstream's Catalog and routes calls to it by original name.
//
// A stdio upstream's pipe carries raw calls beside the SDK session
// (CallRaw, stdioconn.go): requests with string ids whose responses come
// back as bytes, never decoded into SDK types. A streamable HTTP upstream
// takes them as plain POSTs carrying the SDK session's id and protocol
// version (httpraw.go).
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/lifecycle"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Errors returned by calls through an Upstream; wrapped with the server name.
var (
	// ErrUnavailable: the upstream is not connected (starting, restarting or failed).
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrTimeout: the upstream did not answer within the call timeout.
	ErrTimeout = errors.New("upstream timed out")
	// ErrBusy: the upstream's concurrency limit stayed full until the call timed out.
	ErrBusy = errors.New("upstream busy")
	// ErrClosed: the Upstream was closed.
	ErrClosed = errors.New("upstream closed")
	// ErrTooLarge: a message from an http or sse upstream was over
	// Options.MaxMessageBytes; it was not read further.
	ErrTooLarge = errors.New("response exceeds maxMessageBytes")
)

// State is the connection state of an upstream.
type State string

// States, in the order an upstream normally goes through them.
const (
	StateConnecting State = "connecting"
	StateReady      State = "ready"
	StateFailed     State = "failed" // waiting to retry
	StateStopped    State = "stopped"
	// StateStandby: the upstream never connects (Options.Standby); Status.Note says why.
	StateStandby State = "standby"
)

// Status is a point-in-time report of an upstream, for logs and /status.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	Error string `json:"error,omitempty"`
	// Note says why an upstream in StateStandby does not connect.
	Note      string    `json:"note,omitempty"`
	Since     time.Time `json:"since"`
	Restarts  int       `json:"restarts"`
	PID       int       `json:"pid,omitempty"`
	Transport string    `json:"transport"`
}

// Options configures an Upstream. The zero value of each field is its default.
type Options struct {
	// Logger receives the upstream's logs (already named by the caller); nil = no-op.
	Logger *zap.Logger
	// ConnectTimeout bounds connect + initialize + first listing. Default 30s.
	ConnectTimeout time.Duration
	// CallTimeout bounds each forwarded call unless the server config sets its own. Default 60s.
	CallTimeout time.Duration
	// BackoffInitial and BackoffMax bound the reconnect delay, doubled per
	// failure with jitter. Defaults 500ms and 30s.
	BackoffInitial, BackoffMax time.Duration
	// MaxConcurrency caps in-flight calls unless the server config sets its own. Default 64.
	MaxConcurrency int
	// MaxMessageBytes caps one message read from an upstream: a stdio line,
	// an HTTP answer, an SSE event (see limitTransport). Default 4 MiB.
	MaxMessageBytes int
	// StopGrace is each wait of the graceful stop (after closing stdin, after SIGTERM). Default 2s.
	StopGrace time.Duration
	// KeepAlive is the ping interval; a failed ping restarts the connection. Default 30s; negative disables.
	KeepAlive time.Duration
	// GuardPath is an executable that implements `upstream-guard` (the manifold
	// binary). Empty: stdio upstreams are started directly, and a SIGKILLed
	// gateway may leave their grandchildren behind.
	GuardPath string
	// ClientInfo is sent to the upstream in initialize. Default {Name: "manifold"}.
	ClientInfo *mcp.Implementation
	// Transport, when set, replaces the configured transport: each connection
	// attempt calls it. For in-process upstreams and tests (in-memory transports).
	Transport func() (mcp.Transport, error)
	// Pipe, when set (and Transport is not), replaces the configured
	// transport with a byte stream spoken as a stdio upstream's: each
	// connection attempt calls it, and the connection takes raw calls
	// (CallRaw). r is what the server writes, w what it reads; both are
	// closed with the connection. For in-process upstreams and tests.
	Pipe func() (r io.ReadCloser, w io.WriteCloser, err error)
	// Capabilities are the client capabilities declared to the server at
	// connect; nil declares none. What is declared must be answered by
	// Relay.
	Capabilities *mcp.ClientCapabilities
	// Relay receives the server's requests toward clients and the
	// notifications that belong to a client; nil refuses the requests (as
	// undeclared) and drops the notifications.
	Relay Relay
	// NoLists makes the catalog hold only what initialize tells (protocol
	// version, capabilities, instructions): no tools, prompts or resources
	// are listed, at connect or on list_changed. For an upstream session
	// whose lists another upstream of the same server provides.
	NoLists bool
	// Credential, when set, supplies the bearer token of an http or sse
	// server's requests (its auth); nil sends the configured headers only.
	Credential Credential
	// Standby, when set, keeps the upstream from connecting at all: its
	// state is StateStandby with Standby as its note, and calls fail with
	// ErrUnavailable. For a server whose every connection needs a
	// credential only other Upstreams of it have (a per-user one): no
	// attempt that must fail, no retries, no warnings.
	Standby string
	// OnChange is called after the catalog or state changed. It runs on the
	// upstream's own goroutine and must not block for long.
	OnChange func(*Upstream)
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = zap.NewNop()
	}
	setDefault(&out.ConnectTimeout, 30*time.Second)
	setDefault(&out.CallTimeout, 60*time.Second)
	setDefault(&out.BackoffInitial, 500*time.Millisecond)
	setDefault(&out.BackoffMax, 30*time.Second)
	setDefault(&out.StopGrace, 2*time.Second)
	setDefault(&out.KeepAlive, 30*time.Second)
	setDefault(&out.MaxConcurrency, 64)
	setDefault(&out.MaxMessageBytes, 4<<20)
	if out.ClientInfo == nil {
		out.ClientInfo = &mcp.Implementation{Name: "manifold"}
	}
	if out.OnChange == nil {
		out.OnChange = func(*Upstream) {}
	}
	return out
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Upstream is one supervised MCP client. Its methods are safe for concurrent
// use. Start it once; Close stops it and waits for its goroutines.
type Upstream struct {
	cfg         config.Server
	mode        string // cfg.SessionMode()
	opts        Options
	log         *zap.Logger
	callTimeout time.Duration
	slots       chan struct{} // concurrency limit
	// inflight counts the calls holding a slot or waiting for one, so that
	// a drain waits on Idle rather than polling InFlight.
	inflight lifecycle.Gauge

	catalog atomic.Pointer[Catalog]
	refresh chan struct{} // list_changed seen (buffered 1)
	notes   noteQueue     // notifications toward clients, in order (notes.go)
	pending atomic.Uint32 // kinds to refresh

	mu      sync.Mutex
	session *mcp.ClientSession
	client  *mcp.Client // of session
	raw     rawConn     // of session, when it takes raw calls
	status  Status
	// subs are the resource URIs subscribed to, renewed on every new
	// connection.
	subs map[string]bool

	cancel context.CancelFunc
	done   chan struct{}
	// attempted is closed when the first connection attempt has ended,
	// ready or failed (or the upstream stopped).
	attempted     chan struct{}
	attemptedOnce sync.Once
}

// New returns an Upstream for cfg; call Start to connect.
func New(cfg config.Server, opts *Options) *Upstream {
	o := opts.withDefaults()
	u := &Upstream{
		cfg:         cfg,
		mode:        cfg.SessionMode(),
		opts:        o,
		log:         o.Logger,
		callTimeout: o.CallTimeout,
		refresh:     make(chan struct{}, 1),
		done:        make(chan struct{}),
		attempted:   make(chan struct{}),
	}
	u.notes.relay = u.relayNote
	if cfg.Timeout > 0 {
		u.callTimeout = cfg.Timeout
	}
	n := o.MaxConcurrency
	if cfg.MaxConcurrency > 0 {
		n = cfg.MaxConcurrency
	}
	u.slots = make(chan struct{}, n)
	u.status = Status{Name: cfg.Name, State: StateConnecting, Since: time.Now(), Transport: cfg.Type}
	return u
}

// Name returns the server's configured name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Config returns the server config the Upstream was built from.
func (u *Upstream) Config() config.Server { return u.cfg }

// SessionMode is the server's effective session mode (config.Server.SessionMode).
func (u *Upstream) SessionMode() string { return u.mode }

// Catalog returns the latest listing, or nil before the first successful
// connect. It is kept while the upstream restarts, so that its names stay
// stable and calls get a clear "unavailable" error meanwhile.
func (u *Upstream) Catalog() *Catalog { return u.catalog.Load() }

// Status reports the current state.
func (u *Upstream) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status
}

// Start launches the supervisor goroutine. ctx bounds the Upstream's life;
// Close stops it earlier.
func (u *Upstream) Start(ctx context.Context) {
	ctx, u.cancel = context.WithCancel(ctx)
	go func() {
		defer close(u.done)
		u.supervise(ctx)
	}()
}

// Close stops the supervisor, closes the session and stops the server
// process, waiting at most until ctx is done.
func (u *Upstream) Close(ctx context.Context) error {
	if u.cancel == nil {
		return nil
	}
	u.cancel()
	select {
	case <-u.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("upstream %q: stop: %w", u.cfg.Name, ctx.Err())
	}
}

// Done is closed when the supervisor has exited after Close.
func (u *Upstream) Done() <-chan struct{} { return u.done }

func (u *Upstream) setState(s State, err error, pid int) {
	u.mu.Lock()
	u.status.State = s
	u.status.Since = time.Now()
	u.status.Error = ""
	if err != nil {
		u.status.Error = redact.Text(err.Error())
	}
	u.status.PID = pid
	u.mu.Unlock()
	if s != StateConnecting {
		u.attemptedOnce.Do(func() { close(u.attempted) })
	}
}

// Attempted is closed once the first connection attempt has ended: the
// upstream is then ready, failed (and retrying), or stopped.
func (u *Upstream) Attempted() <-chan struct{} { return u.attempted }

// acquire takes a concurrency slot and returns the live session.
func (u *Upstream) acquire(ctx context.Context) (*mcp.ClientSession, error) {
	l, err := u.acquireLive(ctx, time.Time{}, false)
	return l.session, err
}

// live is the connection a call uses.
type live struct {
	session *mcp.ClientSession
	raw     rawConn
}

// acquireLive takes a concurrency slot, waiting until ctx ends or the
// deadline (zero: none) passes, and returns the live connection; with raw,
// one that takes raw calls.
func (u *Upstream) acquireLive(ctx context.Context, deadline time.Time, raw bool) (live, error) {
	u.mu.Lock()
	l, st := live{u.session, u.raw}, u.status
	u.mu.Unlock()
	if l.session == nil {
		if st.State == StateStopped {
			return live{}, fmt.Errorf("upstream %q: %w", u.cfg.Name, ErrClosed)
		}
		if st.Error != "" {
			return live{}, fmt.Errorf("upstream %q: %w (%s; retrying)", u.cfg.Name, ErrUnavailable, st.Error)
		}
		if st.State == StateStandby {
			return live{}, fmt.Errorf("upstream %q: %w (%s)", u.cfg.Name, ErrUnavailable, st.Note)
		}
		return live{}, fmt.Errorf("upstream %q: %w (%s)", u.cfg.Name, ErrUnavailable, st.State)
	}
	if raw && l.raw == nil {
		return live{}, fmt.Errorf("upstream %q: %w", u.cfg.Name, ErrRawUnsupported)
	}
	if ctx.Err() == nil {
		select {
		case u.slots <- struct{}{}:
			u.inflight.Add()
			return l, nil
		default:
		}
	}
	// Every slot is taken (or ctx has ended): wait, with a timer only now
	// (see expiry.go). A waiting call counts as in flight already, so that
	// a drain (Idle) waits for it too: else the last running call's end
	// would make the Upstream idle, and the waiter would take the freed
	// slot on a connection being closed.
	u.inflight.Add()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case u.slots <- struct{}{}:
		return l, nil
	case <-timeout:
		u.inflight.Done()
		return live{}, fmt.Errorf("upstream %q: %w: %d calls in flight", u.cfg.Name, ErrBusy, cap(u.slots))
	case <-ctx.Done():
		u.inflight.Done()
		return live{}, fmt.Errorf("upstream %q: %w: %d calls in flight", u.cfg.Name, ErrBusy, cap(u.slots))
	}
}

func (u *Upstream) release() {
	u.inflight.Done()
	<-u.slots
}

// InFlight returns the number of calls the Upstream is handling now, or
// that wait for a concurrency slot.
func (u *Upstream) InFlight() int { return int(u.inflight.Load()) }

// Idle returns a channel closed once the Upstream has no call in flight:
// at once when it has none now, else when the last one ends. A gateway
// draining a replaced Upstream waits on it.
func (u *Upstream) Idle() <-chan struct{} { return u.inflight.Zero() }
