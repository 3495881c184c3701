package console

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/audit"
)

// Operator is who uses the console: a name, never a credential.
type Operator struct {
	Name string

	viaCookie bool // signed in by the session cookie
	authOff   bool // a loopback client while auth is off
}

// Principal names a principal and its groups, for the catalog's view.
type Principal struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
}

// Overview is the gateway's state, for the Overview page.
type Overview struct {
	Version   string     `json:"version"`
	Config    Config     `json:"config"`
	Upstreams []Upstream `json:"upstreams"`
	// Draining counts upstreams a reload took out of service that are still finishing calls.
	Draining int       `json:"draining"`
	Sessions []Session `json:"sessions"`
	// SessionCount is the number of open downstream sessions.
	SessionCount int      `json:"sessionCount"`
	Reloads      []Reload `json:"reloads"`
	// ReloadsApplied and ReloadsRejected count reloads since the start.
	ReloadsApplied  int `json:"reloadsApplied"`
	ReloadsRejected int `json:"reloadsRejected"`
	// AuditDropped counts audit records lost (queue full, sink failing).
	AuditDropped uint64  `json:"auditDropped"`
	Process      Process `json:"process"`
}

// Config names the config serving.
type Config struct {
	Source   string    `json:"source"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loadedAt"`
}

// Upstream is one configured server.
type Upstream struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	Transport string    `json:"transport"`
	// ProtocolVersion is the version negotiated with the server; empty before it connected.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	PID             int    `json:"pid,omitempty"`
	Restarts        int    `json:"restarts"`
	// LastError is why the server is not ready, with URL credentials redacted.
	LastError string `json:"lastError,omitempty"`
	InFlight  int    `json:"inFlight"`
	Session   string `json:"session"`
	// ClientSessions counts its per-client upstream sessions.
	ClientSessions int `json:"clientSessions,omitempty"`
	// Replacing is the state of the replacement a reload is connecting, if any.
	Replacing string `json:"replacing,omitempty"`
	Tools     int    `json:"tools"`
	Prompts   int    `json:"prompts"`
	Resources int    `json:"resources"`
	// Latency holds the percentiles of the server's calls in the audit ring; nil without
	// any.
	Latency *Latency `json:"latency,omitempty"`
}

// Latency is percentiles of call durations, in milliseconds, over Calls calls.
type Latency struct {
	Calls int     `json:"calls"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// Session counts open downstream sessions of one client and protocol version.
type Session struct {
	Client          string `json:"client"`
	ProtocolVersion string `json:"protocolVersion"`
	Count           int    `json:"count"`
}

// Reload is one reload attempt.
type Reload struct {
	At         time.Time `json:"at"`
	Trigger    string    `json:"trigger"`
	Result     string    `json:"result"`
	DurationMS float64   `json:"durationMs"`
	Error      string    `json:"error,omitempty"`
	Problems   []string  `json:"problems,omitempty"`
	Hash       string    `json:"hash,omitempty"`
}

// Process is the gateway process's footprint.
type Process struct {
	PID        int `json:"pid"`
	Goroutines int `json:"goroutines"`
	OpenFiles  int `json:"openFiles"`
}

// Catalog is everything the gateway exposes, each item with one principal's decision.
type Catalog struct {
	Principal Principal `json:"principal"`
	// Unrestricted: there is no policy; everyone sees everything.
	Unrestricted bool   `json:"unrestricted"`
	Items        []Item `json:"items"`
}

// Item is one tool, prompt, resource or resource template.
type Item struct {
	// Kind is "tool", "prompt", "resource" or "resource template".
	Kind string `json:"kind"`
	// Name is the name or URI as clients see it; Upstream as the server names it.
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Server   string `json:"server"`
	Title    string `json:"title,omitempty"`
	// Visible: the principal sees the item (and may use it).
	Visible bool `json:"visible"`
	// Rule is the policy's explanation of the decision: the rule that decided, or the
	// default.
	Rule string `json:"rule"`
}

// AuditRecord is an audit record as the Audit page shows it: no arguments, no session id.
type AuditRecord struct {
	Seq          uint64    `json:"seq"`
	Time         time.Time `json:"time"`
	Method       string    `json:"method"`
	Principal    string    `json:"principal"`
	Client       string    `json:"client,omitempty"`
	Server       string    `json:"server,omitempty"`
	Name         string    `json:"name"`
	UpstreamName string    `json:"upstreamName,omitempty"`
	Decision     string    `json:"decision"`
	Rule         string    `json:"rule,omitempty"`
	Outcome      string    `json:"outcome"`
	ErrorCode    int64     `json:"errorCode,omitempty"`
	DurationMS   float64   `json:"durationMs"`
	TraceID      string    `json:"traceId,omitempty"`
}

func auditRecord(e audit.Entry) AuditRecord {
	return AuditRecord{
		Seq: e.Seq, Time: e.Time, Method: e.Method, Principal: e.Principal, Client: e.ClientName,
		Server: e.Server, Name: e.Name, UpstreamName: e.UpstreamName, Decision: e.Decision, Rule: e.Rule,
		Outcome: e.Outcome, ErrorCode: e.ErrorCode, DurationMS: millis(e.Duration), TraceID: e.TraceID,
	}
}

// latencies fills in each upstream's Latency from the calls in ring that reached it.
func latencies(ups []Upstream, ring *audit.Ring) {
	if ring == nil {
		return
	}
	byServer := map[string][]time.Duration{}
	for _, e := range ring.Recent(audit.Filter{}, 0) {
		if e.Server != "" && e.Decision == audit.DecisionAllow {
			byServer[e.Server] = append(byServer[e.Server], e.Duration)
		}
	}
	for i := range ups {
		d := byServer[ups[i].Name]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		ups[i].Latency = &Latency{Calls: len(d), P50: millis(percentile(d, 50)), P95: millis(percentile(d, 95)), P99: millis(percentile(d, 99))}
	}
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := int(math.Ceil(float64(p) / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// millis converts d to milliseconds rounded to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
