package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEnvOverrides(t *testing.T) {
	const file = "gateway: {listen: \"127.0.0.1:7000\", limits: {maxSessions: 50}, allowedHosts: [file.test]}\n"
	tests := []struct {
		name    string
		environ []string
		want    func(g *Gateway) // edits the gateway the file alone gives
		errs    []wantErr
	}{
		{
			name:    "no overrides keep the file",
			environ: nil,
			want:    func(*Gateway) {},
		},
		{
			name: "overrides beat the file and the defaults",
			environ: []string{
				"MANIFOLD_GATEWAY__LISTEN=0.0.0.0:9000",
				"MANIFOLD_GATEWAY__INSECURE=true",
				"MANIFOLD_GATEWAY__LIMITS__MAXSESSIONS=10",
				"MANIFOLD_GATEWAY__TIMEOUTS__CALL=2m",
				"MANIFOLD_GATEWAY__LOG__FORMAT=console",
				"MANIFOLD_GATEWAY__TLS__CERTFILE=",
			},
			want: func(g *Gateway) {
				g.Listen, g.Insecure, g.Limits.MaxSessions = "0.0.0.0:9000", true, 10
				g.Timeouts.Call, g.Log.Format = 2*time.Minute, "console"
			},
		},
		{
			name:    "segments match case-insensitively",
			environ: []string{"MANIFOLD_gateway__Limits__maxsessions=11", "MANIFOLD_GATEWAY__MAXTOOLNAMELENGTH=32"},
			want:    func(g *Gateway) { g.Limits.MaxSessions, g.MaxToolNameLength = 11, 32 },
		},
		{
			name:    "lists are comma-separated, empty clears",
			environ: []string{"MANIFOLD_GATEWAY__ALLOWEDHOSTS=a.test, b.test:8080,", "MANIFOLD_GATEWAY__ALLOWEDORIGINS="},
			want:    func(g *Gateway) { g.AllowedHosts = []string{"a.test", "b.test:8080"} },
		},
		{
			name:    "the last duplicate wins",
			environ: []string{"MANIFOLD_GATEWAY__SEPARATOR=-", "MANIFOLD_GATEWAY__SEPARATOR=_"},
			want:    func(g *Gateway) { g.Separator = "_" },
		},
		{
			name: "variables without a double underscore are not overrides",
			environ: []string{
				"MANIFOLD_BINARY=/usr/bin/manifold", "MANIFOLD_LISTEN=x", "OTHER__GATEWAY__LISTEN=x",
				"manifold_gateway__listen=x", "MANIFOLD_GATEWAY__LISTEN", // no "=": not a variable
			},
			want: func(*Gateway) {},
		},
		{
			name: "unknown keys, sections and other sections are errors",
			environ: []string{
				"MANIFOLD_GATEWAY__LIMITS__MAXSESIONS=10",
				"MANIFOLD_GATEWAY__LIMITS=10",
				"MANIFOLD_MCPSERVERS__A__URL=https://x",
				"MANIFOLD_GATEWAY__=1",
				"MANIFOLD_GATEWAY__LISTEN__HOST=x",
			},
			errs: []wantErr{
				{"environment", "MANIFOLD_GATEWAY__", "unknown key"},
				{"environment", "MANIFOLD_GATEWAY__LIMITS", "names the section gateway.limits"},
				{"environment", "MANIFOLD_GATEWAY__LIMITS__MAXSESIONS", "unknown key"},
				{"environment", "MANIFOLD_GATEWAY__LISTEN__HOST", "unknown key"},
				{"environment", "MANIFOLD_MCPSERVERS__A__URL", "no server in the file is named"},
			},
		},
		{
			name:    "bad values are errors naming the variable",
			environ: []string{"MANIFOLD_GATEWAY__INSECURE=maybe", "MANIFOLD_GATEWAY__LIMITS__MAXMESSAGEBYTES=4MiB", "MANIFOLD_GATEWAY__BACKOFF__MAX=30"},
			errs: []wantErr{
				{"environment", "MANIFOLD_GATEWAY__BACKOFF__MAX", "must be a duration"},
				{"environment", "MANIFOLD_GATEWAY__INSECURE", "true or false"},
				{"environment", "MANIFOLD_GATEWAY__LIMITS__MAXMESSAGEBYTES", "must be an integer"},
			},
		},
		{
			name:    "validation blames the variable that set the value",
			environ: []string{"MANIFOLD_GATEWAY__LISTEN=0.0.0.0:9000", "MANIFOLD_GATEWAY__LIMITS__MAXSESSIONS=0"},
			errs: []wantErr{
				{"environment", "MANIFOLD_GATEWAY__LIMITS__MAXSESSIONS", "greater than 0"},
				{"environment", "MANIFOLD_GATEWAY__LISTEN", "or gateway.insecure: true"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(file), FormatYAML, "m.yaml", testOpts(nil, tt.environ...))
			if tt.errs != nil {
				checkErrors(t, err, tt.errs)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := wantGateway()
			want.Listen, want.Limits.MaxSessions, want.AllowedHosts = "127.0.0.1:7000", 50, []string{"file.test"}
			tt.want(&want)
			if diff := cmp.Diff(want, cfg.Gateway); diff != "" {
				t.Errorf("gateway (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvOverridesApplyToTheDefaultConfig(t *testing.T) {
	opts := testOpts(map[string]string{"MANIFOLD_BINARY": "/bin/manifold"}, "MANIFOLD_GATEWAY__LISTEN=127.0.0.1:9999")
	cfg, err := LoadDefault(opts)
	if err != nil {
		t.Fatalf("LoadDefault: %v", err)
	}
	if cfg.Gateway.Listen != "127.0.0.1:9999" {
		t.Errorf("Listen = %q", cfg.Gateway.Listen)
	}
}
