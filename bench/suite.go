//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"text/tabwriter"
)

// report is the part of manifold-bench's JSON report the suite uses.
type report struct {
	Sessions       int      `json:"sessions"`
	Completed      int      `json:"completed"`
	Errors         int      `json:"errors"`
	ErrorSamples   []string `json:"error_samples"`
	TimedOut       bool     `json:"timed_out"`
	CallsPerSecond float64  `json:"calls_per_second"`
	Latency        latency  `json:"latency"`
	Initialize     latency  `json:"initialize"`
	ListTools      latency  `json:"list_tools"`
	RSS            struct {
		PeakBytes int64  `json:"peak_bytes"`
		Processes int    `json:"processes"`
		Err       string `json:"error"`
	} `json:"rss"`
	CPU struct {
		PerCall float64 `json:"per_call_us"`
	} `json:"cpu"`
}

type latency struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// measurement is one report with what it measured.
type measurement struct {
	Target   string `json:"target"`
	Sessions int    `json:"sessions"`
	Round    int    `json:"round"`
	Report   report `json:"report"`
}

// run measures every target at every session count, cfg.rounds times, in
// alternation, then prints the medians.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if cfg.memory {
		payloads, idles, err := runMemory(ctx, cfg, stdout, stderr)
		return errors.Join(err, writeJSON(cfg.jsonOut, struct {
			Payloads []payloadResult `json:"payloads"`
			Idle     []idleResult    `json:"idle_sessions"`
		}{payloads, idles}))
	}
	targets := allTargets
	if len(cfg.targets) > 0 {
		targets = nil
		for _, n := range cfg.targets {
			targets = append(targets, findTarget(n))
		}
	}
	var all []measurement
	var failures []error
	for round := 1; round <= cfg.rounds; round++ {
		for _, sessions := range cfg.sessions {
			for _, t := range targets {
				if err := ctx.Err(); err != nil {
					return err
				}
				rep, err := measure(ctx, cfg, t, sessions)
				if err != nil {
					err = fmt.Errorf("round %d, %s, %d sessions: %w", round, t.name, sessions, err)
					fmt.Fprintln(stderr, err)
					failures = append(failures, err)
					continue
				}
				fmt.Fprintf(stderr, "round %d/%d  %-22s %3d sessions  %8.0f calls/s  p50 %7.3fms  p99 %7.3fms  rss %6.1f MiB  errors %d\n",
					round, cfg.rounds, t.name, sessions, rep.CallsPerSecond, rep.Latency.P50, rep.Latency.P99, mib(rep.RSS.PeakBytes), rep.Errors)
				all = append(all, measurement{Target: t.name, Sessions: sessions, Round: round, Report: *rep})
			}
		}
	}
	meds := medians(all)
	printTable(stdout, cfg, targets, meds)
	err := writeJSON(cfg.jsonOut, struct {
		Measurements []measurement `json:"measurements"`
		Medians      []median      `json:"medians"`
	}{all, meds})
	return errors.Join(append(failures, err)...)
}

// writeJSON writes v as indented JSON to file, unless file is "".
func writeJSON(file string, v any) error {
	if file == "" {
		return nil
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// measure starts target's servers, runs manifold-bench against them and
// stops them. A run with failed calls is an error.
func measure(ctx context.Context, cfg config, t *target, sessions int) (*report, error) {
	e, err := newEnv(cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	targetArgs, err := t.start(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("start: %w\n%s", err, e.logTail())
	}
	args := append([]string{
		"--json", "--sessions", strconv.Itoa(sessions), "--calls", strconv.Itoa(cfg.calls),
		"--tool", "echo", "--args", `{"message":"hello"}`, "--duration", cfg.duration.String(),
	}, targetArgs...)
	cmd := exec.CommandContext(ctx, e.bin("manifold-bench"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("manifold-bench: %v: %s\n%s", runErr, errOut.String(), e.logTail())
	}
	if runErr != nil || rep.Errors > 0 || rep.TimedOut {
		return nil, fmt.Errorf("manifold-bench: %v: %d errors %q, timed out %v: %s\n%s",
			runErr, rep.Errors, rep.ErrorSamples, rep.TimedOut, errOut.String(), e.logTail())
	}
	return &rep, nil
}

// median is the median of each metric of one (target, sessions) pair.
type median struct {
	Target      string  `json:"target"`
	Sessions    int     `json:"sessions"`
	Rounds      int     `json:"rounds"`
	CallsPerSec float64 `json:"calls_per_second"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	Init        float64 `json:"initialize_p50_ms"`
	List        float64 `json:"list_tools_p50_ms"`
	RSS         float64 `json:"rss_peak_mib"`
	Processes   int     `json:"processes"`
	// CPU is the server process's own CPU per call (µs): the gateway's,
	// not its upstreams'.
	CPU float64 `json:"cpu_per_call_us"`
}

func medians(ms []measurement) []median {
	type key struct {
		target   string
		sessions int
	}
	groups := make(map[key][]report)
	var order []key
	for _, m := range ms {
		k := key{m.Target, m.Sessions}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m.Report)
	}
	var out []median
	for _, k := range order {
		rs := groups[k]
		med := func(f func(report) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			return medianOf(v)
		}
		out = append(out, median{
			Target: k.target, Sessions: k.sessions, Rounds: len(rs),
			CallsPerSec: med(func(r report) float64 { return r.CallsPerSecond }),
			P50:         med(func(r report) float64 { return r.Latency.P50 }),
			P90:         med(func(r report) float64 { return r.Latency.P90 }),
			P99:         med(func(r report) float64 { return r.Latency.P99 }),
			Max:         med(func(r report) float64 { return r.Latency.Max }),
			Init:        med(func(r report) float64 { return r.Initialize.P50 }),
			List:        med(func(r report) float64 { return r.ListTools.P50 }),
			RSS:         med(func(r report) float64 { return mib(r.RSS.PeakBytes) }),
			Processes:   rs[len(rs)-1].RSS.Processes,
			CPU:         med(func(r report) float64 { return r.CPU.PerCall }),
		})
	}
	return out
}

// medianOf returns the median of v (the mean of the middle two for an even
// count); it sorts v.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// printTable prints one table per session count: the medians, and for
// gateway targets their ratio to the direct target.
func printTable(w io.Writer, cfg config, targets []*target, meds []median) {
	find := func(name string, sessions int) *median {
		for i := range meds {
			if meds[i].Target == name && meds[i].Sessions == sessions {
				return &meds[i]
			}
		}
		return nil
	}
	fmt.Fprintf(w, "Medians over %d round(s), %d calls of echo per measurement; ratios are to the direct target (x = gateway / direct).\n", cfg.rounds, cfg.calls)
	printGatewayEnv(w, cfg)
	for _, sessions := range cfg.sessions {
		fmt.Fprintf(w, "\n%d session(s)\n", sessions)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "target\tcalls/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tinit ms\tlist ms\tRSS MiB\tprocs\tCPU µs/call\tcalls/s x\tp50 x\tp99 x\tRSS x\t")
		for _, t := range targets {
			m := find(t.name, sessions)
			if m == nil {
				fmt.Fprintf(tw, "%s\t(failed)\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", t.name)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%.1f\t%.2f\t%.1f\t%d\t%.0f\t", t.name, m.CallsPerSec, m.P50, m.P90, m.P99, m.Max, m.Init, m.List, m.RSS, m.Processes, m.CPU)
			if d := find(t.direct, sessions); t.direct != "" && d != nil {
				fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%.2f\t\n", ratio(m.CallsPerSec, d.CallsPerSec), ratio(m.P50, d.P50), ratio(m.P99, d.P99), ratio(m.RSS, d.RSS))
			} else {
				fmt.Fprint(tw, "\t\t\t\t\n")
			}
		}
		tw.Flush()
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
