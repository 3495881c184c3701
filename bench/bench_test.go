//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShort builds the binaries and runs the suite in --short mode: every
// target once at 1 and 4 sessions with 20 calls; and the memory mode with a
// 64 KiB payload through every shape and 20 idle sessions. It checks the
// suite runs and measures, not how fast or small anything is.
func TestShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries")
	}
	bin := t.TempDir()
	for _, cmd := range binaries {
		src := "../cmd/" + cmd
		if cmd == "manifold-relay" {
			src = "./relay"
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), src).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	suite := func(t *testing.T, args ...string) (string, string) {
		jsonOut := filepath.Join(t.TempDir(), "bench.json")
		cfg, err := parseFlags(append([]string{"--bin", bin, "--short", "--json", jsonOut}, args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out, progress strings.Builder
		if err := run(ctx, cfg, &out, &progress); err != nil {
			t.Fatalf("suite: %v\nprogress:\n%s", err, progress.String())
		}
		t.Logf("\n%s", out.String())
		if strings.Contains(out.String(), "(failed)") {
			t.Errorf("a measurement failed:\n%s", out.String())
		}
		return out.String(), jsonOut
	}
	t.Run("throughput", func(t *testing.T) {
		out, _ := suite(t)
		for _, tg := range allTargets {
			if strings.Count(out, tg.name) != 2 {
				t.Errorf("target %q is not in both tables:\n%s", tg.name, out)
			}
		}
	})
	t.Run("memory", func(t *testing.T) {
		out, jsonOut := suite(t, "--memory")
		for _, shape := range memShapes {
			if strings.Count(out, shape.name) != len(payloadKinds) {
				t.Errorf("shape %q is not in the table once per method:\n%s", shape.name, out)
			}
		}
		data, err := os.ReadFile(jsonOut)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Payloads []payloadResult `json:"payloads"`
			Idle     []idleResult    `json:"idle_sessions"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Payloads) != len(memShapes)*len(payloadKinds) {
			t.Errorf("%d payload measurements, want %d", len(rep.Payloads), len(memShapes)*len(payloadKinds))
		}
		for _, p := range rep.Payloads {
			if p.Payload != 64<<10 || p.Baseline <= 0 || p.Peak < p.Baseline {
				t.Errorf("payload measurement %+v: want 64 KiB and 0 < baseline <= peak", p)
			}
		}
		if len(rep.Idle) != 1 || rep.Idle[0].Sessions != 20 || rep.Idle[0].Before <= 0 || rep.Idle[0].After <= 0 {
			t.Errorf("idle measurements %+v: want one of 20 sessions", rep.Idle)
		}
	})
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no bin", nil, "--bin is required"},
		{"bad sessions", []string{"--bin", ".", "--sessions", "1,x"}, "not a positive number"},
		{"bad target", []string{"--bin", ".", "--targets", "nope"}, "unknown target"},
		{"zero rounds", []string{"--bin", ".", "--rounds", "0"}, "must be positive"},
		{"missing binaries", []string{"--bin", "."}, "--bin:"},
		{"small payload", []string{"--bin", ".", "--memory", "--payload", "10"}, "--payload must be"},
		{"no idle sessions", []string{"--bin", ".", "--memory", "--idle-sessions", "-1"}, "--idle-sessions positive"},
		{"gateway env without a value", []string{"--bin", ".", "--gateway-env", "GOMAXPROCS"}, "is not KEY=VALUE"},
		{"gateway env without a key", []string{"--bin", ".", "--gateway-env", "=1"}, "is not KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMedianOf(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := medianOf(tt.in); got != tt.want {
			t.Errorf("medianOf(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestGatewayEnvReachesTheGatewayOnly starts a stand-in for manifold both
// ways the suite starts gateways (startProc for HTTP fronts, the command
// line the load tool runs for stdio→stdio) and a stand-in fixture: the
// settings of --gateway-env reach the first two and not the third.
func TestGatewayEnvReachesTheGatewayOnly(t *testing.T) {
	bin := t.TempDir()
	// It prints what it sees and, as a server, stays up when told to hold:
	// startProc's process is waited for at once, which closes its stdout
	// when it exits, maybe before the test has read it.
	probe := "#!/bin/sh\necho \"[$BENCH_PROBE]\"\n[ \"$1\" = hold ] && exec sleep 60\nexit 0\n"
	for _, name := range []string{"manifold", "manifold-fixture"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(probe), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{binDir: bin, dir: t.TempDir(), timeout: 5 * time.Second, gatewayEnv: []string{"BENCH_PROBE=42"}}
	defer e.stop()
	output := func(r io.Reader) string {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(line)
	}

	_, stdout, err := e.startProc(e.bin("manifold"), e.gatewayEnv, "hold")
	if err != nil {
		t.Fatal(err)
	}
	if got := output(stdout); got != "[42]" {
		t.Errorf("HTTP gateway saw BENCH_PROBE %s, want [42]", got)
	}
	argv := e.gatewayCommand("serve", "--stdio")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "[42]" {
		t.Errorf("stdio gateway (%q) saw BENCH_PROBE %s, want [42]", argv, got)
	}
	_, stdout, err = e.startProc(e.bin("manifold-fixture"), nil, "hold")
	if err != nil {
		t.Fatal(err)
	}
	if got := output(stdout); got != "[]" {
		t.Errorf("fixture saw BENCH_PROBE %s, want it unset", got)
	}
}
