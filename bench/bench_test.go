//go:build linux

package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShort builds the binaries and runs the suite in --short mode: every
// target once at 1 and 4 sessions with 20 calls. It checks the suite runs,
// not how fast anything is.
func TestShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	bin := t.TempDir()
	for _, cmd := range []string{"manifold", "manifold-fixture", "manifold-bench"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "../cmd/"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	jsonOut := filepath.Join(t.TempDir(), "bench.json")
	cfg, err := parseFlags([]string{"--bin", bin, "--short", "--json", jsonOut}, io.Discard)
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
	for _, tg := range allTargets {
		if strings.Count(out.String(), tg.name) != 2 {
			t.Errorf("target %q is not in both tables:\n%s", tg.name, out.String())
		}
	}
	if strings.Contains(out.String(), "(failed)") {
		t.Errorf("a measurement failed:\n%s", out.String())
	}
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
