package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/internal/loadgen"
	"go.uber.org/goleak"
)

const fixtureEnv = "MANIFOLD_BENCH_TEST_FIXTURE"

func TestMain(m *testing.M) {
	if os.Getenv(fixtureEnv) == "1" {
		// Act as manifold-fixture for the end-to-end test.
		if err := fixture.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    loadgen.Config
		json    bool
		wantErr string
	}{
		{name: "url", args: []string{"--url", "http://127.0.0.1:1/mcp", "--target-pid", "12, 34", "--json"},
			want: loadgen.Config{Target: loadgen.Target{URL: "http://127.0.0.1:1/mcp"}, TargetPIDs: []int{12, 34}}, json: true},
		{name: "cmd", args: []string{"--cmd", "srv  --stdio", "--sessions", "8", "--calls", "50", "--tool", "t", "--args", `{"a":1}`},
			want: loadgen.Config{Target: loadgen.Target{Command: []string{"srv", "--stdio"}}, Sessions: 8, Calls: 50, Tool: "t", Args: json.RawMessage(`{"a":1}`)}},
		{name: "after dashes", args: []string{"--", "srv", "--flag value"},
			want: loadgen.Config{Target: loadgen.Target{Command: []string{"srv", "--flag value"}}}},
		{name: "no target", args: nil, wantErr: "exactly one target"},
		{name: "two targets", args: []string{"--url", "http://x", "--", "srv"}, wantErr: "exactly one target"},
		{name: "cmd twice", args: []string{"--cmd", "a", "--", "b"}, wantErr: "not both"},
		{name: "zero sessions", args: []string{"--url", "http://x", "--sessions", "0"}, wantErr: "at least 1"},
		{name: "bad duration", args: []string{"--url", "http://x", "--duration", "-1s"}, wantErr: "must be positive"},
		{name: "bad pid", args: []string{"--url", "http://x", "--target-pid", "x"}, wantErr: "not a process id"},
	}
	defaults := func(c loadgen.Config) loadgen.Config {
		d := loadgen.Config{Sessions: loadgen.DefaultSessions, Calls: loadgen.DefaultCalls, Tool: loadgen.DefaultTool,
			Args: json.RawMessage(loadgen.DefaultArgs), Duration: loadgen.DefaultDuration, CallTimeout: loadgen.DefaultCallTimeout}
		d.Target, d.TargetPIDs = c.Target, c.TargetPIDs
		if c.Sessions != 0 {
			d.Sessions, d.Calls, d.Tool, d.Args = c.Sessions, c.Calls, c.Tool, c.Args
		}
		return d
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, asJSON, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(defaults(tt.want), got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if asJSON != tt.json {
				t.Errorf("json = %v, want %v", asJSON, tt.json)
			}
		})
	}
}

func TestRunStdio(t *testing.T) {
	t.Setenv(fixtureEnv, "1")
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"--sessions", "2", "--calls", "20", "--json", "--", os.Args[0], "--stdio"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, errOut.String(), out.String())
	}
	var rep struct {
		Completed int `json:"completed"`
		Errors    int `json:"errors"`
		RSS       struct {
			Processes int `json:"processes"`
		} `json:"rss"`
	}
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out.String())
	}
	if rep.Completed != 20 || rep.Errors != 0 || rep.RSS.Processes != 2 {
		t.Errorf("report = %+v, want 20 calls, no errors, 2 processes", rep)
	}
}

func TestRunFailures(t *testing.T) {
	t.Setenv(fixtureEnv, "1")
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"usage", []string{"--sessions", "x"}, 2},
		{"help", []string{"-h"}, 0},
		{"tool errors", []string{"--calls", "3", "--tool", "test_error_handling", "--args", "{}", "--", os.Args[0]}, 1},
		{"unknown tool", []string{"--calls", "1", "--tool", "nope", "--", os.Args[0]}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			if code := run(context.Background(), tt.args, &out, &errOut); code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, errOut.String())
			}
		})
	}
}
