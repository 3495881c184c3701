package telemetry

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
)

// Attribute keys of Manifold's own metrics, besides ServerKey.
const (
	// KindKey is what a policy denial hid: "tool", "prompt", "resource" or "template".
	KindKey = attribute.Key("manifold.kind")
	// StateKey is an upstream's state, as the upstream package names it.
	StateKey = attribute.Key("manifold.state")
	// ResultKey is the result of a reload: "ok" or "rejected".
	ResultKey = attribute.Key("manifold.result")
)

// Names of Manifold's own instruments (Prometheus: dots become underscores, counters end in
// _total). The MCP durations are the semantic conventions' mcp.server.operation.duration,
// mcp.client.operation.duration and mcp.server.session.duration (in seconds).
const (
	MetricSessionsActive   = "manifold.sessions.active"
	MetricCallsInflight    = "manifold.calls.inflight"
	MetricPolicyDenials    = "manifold.policy.denials"
	MetricConfigReloads    = "manifold.config.reloads"
	MetricUpstreamState    = "manifold.upstream.state"
	MetricUpstreamRestarts = "manifold.upstream.restarts"
	MetricAuditDropped     = "manifold.audit.dropped"
)

// maxCachedSets bounds each cache of precomputed attribute sets. Beyond it, new combinations
// are still recorded, at the cost of building their set on every call.
const maxCachedSets = 4096

// Metrics holds the gateway's instruments. Its methods are safe for concurrent use and cheap
// enough for the request path: attribute sets are built once per combination of values and
// cached, so a recording costs one lookup in a copy-on-write map and no allocation (with
// tracing on, the SDK may take a trace-based exemplar). On a nil *Metrics they do nothing.
//
// Keep attribute values bounded: method names, server names from the config, error types
// (ErrorType) and kinds, never tool names or URIs.
type Metrics struct {
	meter metric.Meter

	serverOps  metric.Float64Histogram
	clientOps  metric.Float64Histogram
	sessionDur metric.Float64Histogram
	sessions   metric.Int64UpDownCounter
	inflight   metric.Int64UpDownCounter
	denials    metric.Int64Counter
	reloads    metric.Int64Counter

	upState      metric.Int64ObservableGauge
	upRestarts   metric.Int64ObservableCounter
	auditDropped metric.Int64ObservableCounter

	opSets     setCache[opKey]
	serverSets setCache[string]
	denySets   setCache[denyKey]
	reloadOK   []metric.AddOption
	reloadFail []metric.AddOption
	traffic    trafficInstruments // traffic.go
}

type opKey struct{ method, server, errType string }

type denyKey struct{ kind, server string }

func newMetrics(m metric.Meter) (*Metrics, error) {
	ms := &Metrics{meter: m}
	// Bucket bounds in seconds: for operations, those the MCP semantic conventions advise; for
	// sessions, 1s to a day.
	operationBuckets := []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	sessionBuckets := []float64{1, 10, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400}
	var errs [10]error
	var sd mcpconv.ServerOperationDuration
	sd, errs[0] = mcpconv.NewServerOperationDuration(m, metric.WithExplicitBucketBoundaries(operationBuckets...))
	ms.serverOps = sd.Inst()
	var cd mcpconv.ClientOperationDuration
	cd, errs[1] = mcpconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(operationBuckets...))
	ms.clientOps = cd.Inst()
	var ss mcpconv.ServerSessionDuration
	ss, errs[2] = mcpconv.NewServerSessionDuration(m, metric.WithExplicitBucketBoundaries(sessionBuckets...))
	ms.sessionDur = ss.Inst()
	ms.sessions, errs[3] = m.Int64UpDownCounter(MetricSessionsActive, metric.WithUnit("{session}"),
		metric.WithDescription("Downstream MCP sessions open now."))
	ms.inflight, errs[4] = m.Int64UpDownCounter(MetricCallsInflight, metric.WithUnit("{call}"),
		metric.WithDescription("Calls in flight to upstream servers, by server."))
	ms.denials, errs[5] = m.Int64Counter(MetricPolicyDenials, metric.WithUnit("{denial}"),
		metric.WithDescription("Requests denied by the policy, by kind of item and server."))
	ms.reloads, errs[6] = m.Int64Counter(MetricConfigReloads, metric.WithUnit("{reload}"),
		metric.WithDescription("Configuration reloads, by result: ok or rejected (the old configuration stays)."))
	ms.upState, errs[7] = m.Int64ObservableGauge(MetricUpstreamState,
		metric.WithDescription("1 for the state each upstream server is in, by server and state."))
	ms.upRestarts, errs[8] = m.Int64ObservableCounter(MetricUpstreamRestarts, metric.WithUnit("{restart}"),
		metric.WithDescription("Restarts of each upstream server since it was configured."))
	ms.auditDropped, errs[9] = m.Int64ObservableCounter(MetricAuditDropped, metric.WithUnit("{record}"),
		metric.WithDescription("Audit records lost: queue full, log closed, or a sink failed."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("telemetry: instruments: %w", err)
		}
	}

	ms.opSets.build = func(k opKey) attribute.Set {
		kv := make([]attribute.KeyValue, 0, 3)
		kv = append(kv, semconv.McpMethodNameKey.String(k.method))
		if k.server != "" {
			kv = append(kv, ServerKey.String(k.server))
		}
		if k.errType != "" {
			kv = append(kv, semconv.ErrorTypeKey.String(k.errType))
		}
		return attribute.NewSet(kv...)
	}
	if err := ms.traffic.init(m); err != nil {
		return nil, err
	}
	ms.serverSets.build = func(server string) attribute.Set { return attribute.NewSet(ServerKey.String(server)) }
	ms.denySets.build = func(k denyKey) attribute.Set {
		return attribute.NewSet(KindKey.String(k.kind), ServerKey.String(k.server))
	}
	ms.reloadOK = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(ResultKey.String("ok")))}
	ms.reloadFail = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(ResultKey.String("rejected")))}
	return ms, nil
}

// ServerOp records one downstream request (mcp.server.operation.duration) taking d: its MCP
// method, the upstream server that served it ("" when none did) and its error type ("" for
// success; see ErrorType and ErrorTypeToolError). The count of the histogram is the request
// counter by method, server and outcome.
func (m *Metrics) ServerOp(ctx context.Context, method, server, errType string, d time.Duration) {
	if m == nil {
		return
	}
	m.serverOps.Record(ctx, d.Seconds(), m.opSets.get(opKey{method, server, errType}).record...)
}

// ClientOp records one upstream call (mcp.client.operation.duration), as ServerOp does.
func (m *Metrics) ClientOp(ctx context.Context, method, server, errType string, d time.Duration) {
	if m == nil {
		return
	}
	m.clientOps.Record(ctx, d.Seconds(), m.opSets.get(opKey{method, server, errType}).record...)
}

// SessionOpened counts a downstream session as open.
func (m *Metrics) SessionOpened(ctx context.Context) {
	if m == nil {
		return
	}
	m.sessions.Add(ctx, 1)
}

// SessionClosed counts a downstream session as closed after lasting d
// (mcp.server.session.duration). Call it once for every SessionOpened.
func (m *Metrics) SessionClosed(ctx context.Context, d time.Duration) {
	if m == nil {
		return
	}
	m.sessions.Add(ctx, -1)
	m.sessionDur.Record(ctx, d.Seconds())
}

// Inflight adds delta (1 when a call to server starts, -1 when it ends) to the calls in
// flight.
func (m *Metrics) Inflight(ctx context.Context, server string, delta int64) {
	if m == nil {
		return
	}
	m.inflight.Add(ctx, delta, m.serverSets.get(server).add...)
}

// PolicyDenied counts one request the policy denied: the kind of item ("tool", "prompt",
// "resource", "template") and the server that owns it ("" when unknown).
func (m *Metrics) PolicyDenied(ctx context.Context, kind, server string) {
	if m == nil {
		return
	}
	m.denials.Add(ctx, 1, m.denySets.get(denyKey{kind, server}).add...)
}

// Reload counts one configuration reload: ok, or rejected (the old configuration stays).
func (m *Metrics) Reload(ctx context.Context, ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.Add(ctx, 1, m.reloadOK...)
	} else {
		m.reloads.Add(ctx, 1, m.reloadFail...)
	}
}

// UpstreamState is one upstream server as ObserveUpstreams reports it.
type UpstreamState struct {
	// Name is the server's mcpServers key.
	Name string
	// State is its state, such as "ready" or "backoff"; the gauge is 1 for it.
	State string
	// Restarts counts its restarts so far (a cumulative counter).
	Restarts int64
}

// ObserveUpstreams makes f the source of manifold.upstream.state and
// manifold.upstream.restarts: f is called at every scrape, concurrently with anything else,
// and must be quick (a panic in it fails that scrape only). The returned function stops the
// observation (on reload, say); several sources may be registered at once. On a nil *Metrics
// it registers nothing.
func (m *Metrics) ObserveUpstreams(f func() []UpstreamState) (stop func()) {
	if m == nil {
		return func() {}
	}
	return m.register(func(_ context.Context, o metric.Observer) error {
		for _, u := range f() {
			server := ServerKey.String(u.Name)
			o.ObserveInt64(m.upState, 1, metric.WithAttributes(server, StateKey.String(u.State)))
			o.ObserveInt64(m.upRestarts, u.Restarts, metric.WithAttributes(server))
		}
		return nil
	}, m.upState, m.upRestarts)
}

// ObserveAuditDropped makes f (such as (*audit.Log).Dropped) the source of
// manifold.audit.dropped, as ObserveUpstreams does. A new audit log after a reload starts
// from 0: stop the old observation and register the new one, and Prometheus sees a counter
// reset.
func (m *Metrics) ObserveAuditDropped(f func() uint64) (stop func()) {
	if m == nil {
		return func() {}
	}
	return m.register(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(m.auditDropped, int64(min(f(), math.MaxInt64)))
		return nil
	}, m.auditDropped)
}

func (m *Metrics) register(cb metric.Callback, insts ...metric.Observable) func() {
	safe := func(ctx context.Context, o metric.Observer) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("telemetry: metric callback panicked: %v", r)
			}
		}()
		return cb(ctx, o)
	}
	reg, err := m.meter.RegisterCallback(safe, insts...)
	if err != nil {
		// Only possible for instruments of another meter: a programming error.
		panic(fmt.Sprintf("telemetry: register callback: %v", err))
	}
	var once sync.Once
	return func() { once.Do(func() { _ = reg.Unregister() }) }
}

// setCache maps values of K to precomputed measurement options. Reads are lock-free: an
// atomic load and a lookup in a map that is never modified once published. A miss takes a
// mutex and goes to a dirty map holding every entry, which replaces the read map once it has
// seen as many misses as it has entries (so copying stays amortised O(1), as in sync.Map).
type setCache[K comparable] struct {
	build func(K) attribute.Set
	read  atomic.Pointer[map[K]*options]

	mu     sync.Mutex
	dirty  map[K]*options // nil, or a superset of *read
	misses int
}

// options are the measurement options of one attribute set, as slices ready to pass on:
// passing a slice to a variadic parameter does not allocate, building one does.
type options struct {
	record []metric.RecordOption
	add    []metric.AddOption
}

func (c *setCache[K]) get(k K) *options {
	if m := c.read.Load(); m != nil {
		if o, ok := (*m)[k]; ok {
			return o
		}
	}
	return c.miss(k)
}

func (c *setCache[K]) miss(k K) *options {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = make(map[K]*options)
		if m := c.read.Load(); m != nil {
			maps.Copy(c.dirty, *m)
		}
	}
	o, ok := c.dirty[k]
	if !ok {
		opt := metric.WithAttributeSet(c.build(k))
		o = &options{record: []metric.RecordOption{opt}, add: []metric.AddOption{opt}}
		if len(c.dirty) >= maxCachedSets {
			return o // recorded, not cached
		}
		c.dirty[k] = o
	}
	if c.misses++; c.misses >= len(c.dirty) {
		read := c.dirty
		c.read.Store(&read)
		c.dirty, c.misses = nil, 0
	}
	return o
}
