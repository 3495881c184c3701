package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a Run.
type Report struct {
	Target   string `json:"target"`
	Tool     string `json:"tool"`
	Sessions int    `json:"sessions"`
	// Calls is the number of calls asked for; Completed succeeded, Errors
	// failed (a JSON-RPC error, a timeout or a tool result with isError).
	Calls     int `json:"calls"`
	Completed int `json:"completed"`
	Errors    int `json:"errors"`
	// ToolErrors are the Errors that were tool results with isError (such
	// as a gateway's rate limit refusals).
	ToolErrors int `json:"tool_errors"`
	// ErrorSamples are up to 5 distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// TimedOut is set when the call phase hit Config.Duration first.
	TimedOut bool `json:"timed_out"`
	// Elapsed is the wall time of the call phase.
	Elapsed        time.Duration `json:"-"`
	CallsPerSecond float64       `json:"calls_per_second"`
	// Latency is over the successful calls.
	Latency Percentiles `json:"latency"`
	// Initialize is the time to connect each session: start the process
	// (stdio) and complete initialize. ListTools is each session's first
	// tools/list, all pages.
	Initialize Percentiles `json:"initialize"`
	ListTools  Percentiles `json:"list_tools"`
	RSS        RSS         `json:"rss"`
	CPU        CPU         `json:"cpu"`
}

// MarshalJSON adds elapsed_ms to the report's fields.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		*plain
		ElapsedMS float64 `json:"elapsed_ms"`
	}{(*plain)(r), ms(r.Elapsed)})
}

// Percentiles summarizes a set of durations.
type Percentiles struct {
	N                        int
	P50, P90, P99, Max, Mean time.Duration
}

// MarshalJSON writes the durations as milliseconds.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"n": p.N, "p50_ms": ms(p.P50), "p90_ms": ms(p.P90), "p99_ms": ms(p.P99),
		"max_ms": ms(p.Max), "mean_ms": ms(p.Mean),
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles computes nearest-rank percentiles of ds (which it sorts).
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(ds))+0.999999) - 1 // ceil(p*n) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Percentiles{
		N: len(ds), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99),
		Max: ds[len(ds)-1], Mean: sum / time.Duration(len(ds)),
	}
}

// WriteTable writes r as a human-readable table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("target\t%s\n", r.Target)
	p("tool\t%s\n", r.Tool)
	p("sessions\t%d\n", r.Sessions)
	p("calls\t%d asked, %d ok, %d errors (%d tool errors)", r.Calls, r.Completed, r.Errors, r.ToolErrors)
	if r.TimedOut {
		p(" (stopped by the duration bound)")
	}
	p("\n")
	for _, e := range r.ErrorSamples {
		p("  error\t%s\n", e)
	}
	p("elapsed\t%s\n", r.Elapsed.Round(time.Millisecond))
	p("calls/s\t%.0f\n", r.CallsPerSecond)
	p("\tp50\tp90\tp99\tmax\tmean\n")
	for _, row := range []struct {
		name string
		p    Percentiles
	}{{"call", r.Latency}, {"initialize", r.Initialize}, {"tools/list", r.ListTools}} {
		p("%s\t%s\t%s\t%s\t%s\t%s\n", row.name, fmtDur(row.p.P50), fmtDur(row.p.P90), fmtDur(row.p.P99), fmtDur(row.p.Max), fmtDur(row.p.Mean))
	}
	if r.RSS.Err != "" {
		p("rss\tunavailable: %s\n", r.RSS.Err)
	} else {
		p("rss\tpeak %s, end %s (%d processes)\n", FormatBytes(r.RSS.PeakBytes), FormatBytes(r.RSS.EndBytes), r.RSS.Processes)
	}
	if r.CPU.Err != "" {
		p("cpu\tunavailable: %s\n", r.CPU.Err)
	} else {
		p("cpu\t%.0fµs per call (%s in all, the server process itself)\n", r.CPU.PerCallMicros, r.CPU.Total.Round(time.Millisecond))
	}
	return tw.Flush()
}

// fmtDur formats d with a precision that suits latencies.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", ms(d))
	}
	return d.Round(time.Millisecond).String()
}

// FormatBytes formats n bytes in MiB.
func FormatBytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
