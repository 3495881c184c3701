package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// refreshDelay debounces list_changed notifications: a burst of them causes
// one re-listing.
const refreshDelay = 100 * time.Millisecond

// refreshMaxWait bounds the debounce: a steady stream of notifications
// still causes a refresh this often.
const refreshMaxWait = time.Second

// keepAliveFailures is how many pings in a row may go unanswered before the
// connection is restarted.
const keepAliveFailures = 2

// supervise connects, serves, and reconnects with backoff until ctx is done.
func (u *Upstream) supervise(ctx context.Context) {
	if u.opts.Standby != "" {
		u.standby(ctx)
		return
	}
	delay := u.opts.BackoffInitial
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			u.mu.Lock()
			u.status.Restarts++
			u.mu.Unlock()
		}
		u.setState(StateConnecting, nil, 0)
		started := time.Now()
		err := redact.Error(u.connectAndServe(ctx)) // for /status, the log and callers
		if ctx.Err() != nil {
			u.setState(StateStopped, nil, 0)
			return
		}
		u.setState(StateFailed, err, 0)
		u.opts.OnChange(u)
		// A connection that lived long is not a crash loop: start over.
		if time.Since(started) > 2*u.opts.BackoffMax {
			delay = u.opts.BackoffInitial
		}
		wait := delay/2 + rand.N(delay/2+1)
		u.log.Warn("upstream failed; retrying", zap.Error(err), zap.Duration(keyRetryIn, wait))
		select {
		case <-ctx.Done():
			u.setState(StateStopped, nil, 0)
			return
		case <-time.After(wait):
		}
		delay = min(delay*2, u.opts.BackoffMax)
	}
}

// standby holds the upstream in StateStandby until ctx is done
// (Options.Standby).
func (u *Upstream) standby(ctx context.Context) {
	u.mu.Lock()
	u.status.Note = u.opts.Standby
	u.mu.Unlock()
	u.setState(StateStandby, nil, 0)
	u.opts.OnChange(u)
	<-ctx.Done()
	u.setState(StateStopped, nil, 0)
}

// connectAndServe runs one connection: connect, list, then serve refreshes
// until the session ends or ctx is done.
func (u *Upstream) connectAndServe(ctx context.Context) error {
	conn, err := u.dial()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, u.opts.ConnectTimeout)
	defer cancel()
	// A peer that stops reading can block the SDK's Connect past its
	// deadline (its cleanup writes a cancellation notification). When the
	// deadline passes, abort the transport underneath: stopping the process
	// closes our pipe ends, which unblocks the SDK.
	connecting := make(chan struct{})
	abort := context.AfterFunc(cctx, func() {
		select {
		case <-connecting:
		default:
			conn.stop(0)
		}
	})
	client := u.newClient()
	cs, err := client.Connect(cctx, u.withNoteQueue(conn.transport), nil)
	close(connecting)
	abort()
	if err != nil {
		conn.stop(u.opts.StopGrace)
		conn.release()
		return fmt.Errorf("connect: %w", connectError(cctx, err, u.opts.ConnectTimeout))
	}
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	defer func() {
		// The process first (stdin EOF, then signals), so that it exits with
		// its stdout still open; then the session, which has seen the EOF.
		conn.stop(u.opts.StopGrace)
		cs.Close()
		<-ended
		conn.release()
	}()

	lists := kindAll
	if u.opts.NoLists {
		lists = 0
	}
	cat, err := fetchCatalog(cctx, cs, nil, lists)
	if err != nil {
		return fmt.Errorf("list: %w", connectError(cctx, err, u.opts.ConnectTimeout))
	}
	u.catalog.Store(cat)
	u.resubscribe(cctx, cs)
	var raw rawConn
	if conn.raw != nil {
		// A stateless version's requests carry the client's _meta members
		// (SEP-2575), which the SDK adds to its own: raw calls add them too.
		if mcpx.Stateless(cat.ProtocolVersion) {
			if conn.raw.meta, err = requestMeta(cat.ProtocolVersion, u.opts.ClientInfo, u.opts.Capabilities); err != nil {
				return fmt.Errorf("raw calls: %w", err)
			}
		}
		raw = conn.raw
	}
	// A streamable HTTP session takes raw calls as plain POSTs with the
	// transport's layers (httpraw.go, newRawHTTPClient); a 404 to one of them means the
	// upstream lost the session, which ends this connection.
	var hr *httpRaw
	if conn.rawHTTP != nil {
		if hr, err = u.newHTTPRaw(cs, conn.rawHTTP); err != nil {
			return fmt.Errorf("raw calls: %w", err)
		}
		defer hr.close()
		raw = hr
	}
	u.mu.Lock()
	u.session, u.client, u.raw = cs, client, raw
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.session, u.client, u.raw = nil, nil, nil
		u.mu.Unlock()
	}()
	u.setState(StateReady, nil, conn.pid())
	u.log.Info("upstream ready",
		zap.String(keyProtocol, cat.ProtocolVersion),
		zap.Int(keyTools, len(cat.Tools)), zap.Int(keyPrompts, len(cat.Prompts)),
		zap.Int(keyResources, len(cat.Resources)), zap.Int(keyTemplates, len(cat.Templates)))
	u.opts.OnChange(u)

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// Our own keep-alive: the SDK's does not run on sessions that negotiated
	// 2026-07-28 (server/discover), so it is disabled in newClient.
	var ping <-chan time.Time
	if u.opts.KeepAlive > 0 {
		t := time.NewTicker(u.opts.KeepAlive)
		defer t.Stop()
		ping = t.C
	}
	missed := 0
	var burst time.Time // first list_changed not yet refreshed
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ping:
			pctx, cancel := context.WithTimeout(ctx, u.opts.KeepAlive/2)
			err := cs.Ping(pctx, nil)
			cancel()
			if _, answered := mcpx.AsRPCError(err); err == nil || answered || ctx.Err() != nil {
				missed = 0 // an error answer (no ping method) is alive too
				continue
			}
			if missed++; missed >= keepAliveFailures {
				return fmt.Errorf("no answer to %d pings: %w", missed, err)
			}
			u.log.Warn("upstream ping failed", zap.Error(redact.Error(err)))
		case err := <-ended:
			ended <- err // for the deferred Close
			if err == nil {
				err = errors.New("server closed the connection")
			}
			return fmt.Errorf("session ended: %w", err)
		case <-hr.lostC():
			return errSessionLost
		case <-conn.exited():
			return fmt.Errorf("server process exited: %v", conn.proc.err)
		case <-u.refresh:
			// Debounce, but never postpone a refresh past refreshMaxWait
			// from the first notification of a burst.
			if burst.IsZero() {
				burst = time.Now()
			}
			debounce.Reset(min(refreshDelay, max(0, refreshMaxWait-time.Since(burst))))
		case <-debounce.C:
			burst = time.Time{}
			k := kind(u.pending.Swap(0))
			rctx, cancel := context.WithTimeout(ctx, u.opts.ConnectTimeout)
			next, err := fetchCatalog(rctx, cs, u.catalog.Load(), k)
			cancel()
			if err != nil {
				u.log.Warn("upstream refresh failed", zap.Error(redact.Error(err)))
				continue
			}
			u.catalog.Store(next)
			u.opts.OnChange(u)
		}
	}
}

func connectError(ctx context.Context, err error, limit time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", limit, err)
	}
	return err
}

// listChanged records that lists of kind k changed; the supervisor re-lists
// after refreshDelay. Called from SDK notification handlers: never blocks.
func (u *Upstream) listChanged(k kind) {
	for {
		old := u.pending.Load()
		if u.pending.CompareAndSwap(old, old|uint32(k)) {
			break
		}
	}
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// resubscribe renews on a new connection the resource subscriptions held
// before it, and tells the relay each resource may have changed meanwhile.
func (u *Upstream) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	u.mu.Lock()
	uris := make([]string, 0, len(u.subs))
	for uri := range u.subs {
		uris = append(uris, uri)
	}
	u.mu.Unlock()
	for _, uri := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			u.log.Warn("renewing a resource subscription", zap.String(keyURI, uri), zap.Error(redact.Error(err)))
			continue
		}
		if u.opts.Relay != nil {
			u.opts.Relay.ResourceUpdated(u, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

// newClient builds the go-sdk client for one connection. It declares
// Options.Capabilities (none when nil), and passes what the server sends
// toward clients to Options.Relay (see relayRequests).
func (u *Upstream) newClient() *mcp.Client {
	caps := &mcp.ClientCapabilities{}
	if u.opts.Capabilities != nil {
		c := *u.opts.Capabilities
		caps = &c
	}
	o := &mcp.ClientOptions{
		Capabilities: caps,
		// Results pass through untouched, input_required ones included.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		// KeepAlive stays 0: connectAndServe pings (see there).
	}
	if !u.opts.NoLists {
		o.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { u.listChanged(kindTools) }
		o.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { u.listChanged(kindPrompts) }
		o.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { u.listChanged(kindResources) }
	}
	u.relayNotifications(o)
	c := mcp.NewClient(u.opts.ClientInfo, o)
	c.AddReceivingMiddleware(mcpx.Recover(u.log), u.relayRequests)
	return c
}
