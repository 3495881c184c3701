package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/gateway"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/rawio"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func serve(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML or JSON); default: the embedded demo config")
	listen := fs.String("listen", "", "listen address, overrides gateway.listen")
	stdio := fs.Bool("stdio", false, "serve one client over stdin/stdout instead of HTTP")
	logFile := fs.String("log-file", "", "write logs to this file instead of stderr")
	toolset := fs.String("toolset", "", "with --stdio: serve only this toolset of the config (over HTTP each toolset has its own /mcp/NAME)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *toolset != "" && !*stdio {
		fmt.Fprintln(stderr, "manifold: --toolset goes with --stdio; over HTTP every toolset is served at /mcp/NAME and /sse/NAME")
		return 2
	}
	// load reads the config with the command line's overrides: at start,
	// and again for every reload.
	load := func() (*config.Config, error) {
		cfg, err := loadConfig(*cfgPath)
		if err != nil || *listen == "" {
			return cfg, err
		}
		cfg.Gateway.Listen = *listen
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return cfg, nil
	}
	if *listen != "" {
		if _, _, err := net.SplitHostPort(*listen); err != nil {
			fmt.Fprintf(stderr, "manifold: --listen %q: must be host:port, such as 127.0.0.1:8080\n", *listen)
			return 2
		}
	}
	cfg, err := load()
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	logger, level, closeLog, err := newLogger(cfg.Gateway.Log, *logFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "manifold: %v\n", err)
		return 1
	}
	defer closeLog()

	if _, ok := cfg.Toolsets[*toolset]; *toolset != "" && !ok {
		fmt.Fprintf(stderr, "manifold: %s: --toolset %q: no such toolset (toolsets: %s)\n", cfg.Source, *toolset, strings.Join(cfg.ToolsetNames(), ", "))
		return 2
	}
	if *stdio && cfg.Audit != nil && cfg.Audit.Stdout {
		fmt.Fprintf(stderr, "manifold: %s: audit.stdout: not with serve --stdio, where standard output carries the MCP protocol; write the audit log to audit.file instead\n", cfg.Source)
		return 1
	}
	// shutdown runs one step of the shutdown within the drain timeout.
	shutdown := func(what string, stop func(context.Context) error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Gateway.Timeouts.Drain)
		defer cancel()
		if err := stop(sctx); err != nil {
			logger.Warn(what, zap.Error(err))
		}
	}

	// The audit log and the telemetry live as long as the process: a reload
	// keeps them (their sections apply at restart). They are closed last,
	// after the gateway, so that the last requests are recorded.
	// The ring keeps the latest records for the operator console (/ui).
	auditLog, err := audit.New(cfg.Audit, &audit.Options{Logger: logger, Stdout: stdout, Ring: audit.NewRing(0)})
	if err != nil {
		logger.Error("audit log", zap.Error(err))
		return 1
	}
	defer shutdown("closing the audit log", auditLog.Close)
	tel, err := telemetry.New(ctx, &cfg.Telemetry, &telemetry.Options{Logger: logger, ServiceVersion: version()})
	if err != nil {
		logger.Error("telemetry", zap.Error(err))
		return 1
	}
	defer shutdown("stopping telemetry", tel.Shutdown)

	exe, err := os.Executable()
	if err != nil {
		logger.Warn("cannot find own executable; stdio upstreams run without the process-group guard", zap.Error(err))
	}
	gw, err := gateway.New(cfg, &gateway.Options{
		Logger: logger, Level: &level, Version: version(), GuardPath: exe, LoadConfig: load,
		Audit: auditLog, Telemetry: tel,
	})
	if err != nil {
		logger.Error("gateway", zap.Error(err))
		return 1
	}
	// Bind first: a busy port fails before any upstream is started.
	var ln net.Listener
	if !*stdio {
		if ln, err = net.Listen("tcp", cfg.Gateway.Listen); err != nil {
			logger.Error("listen", zap.Error(err))
			return 1
		}
	}
	if m := cfg.Telemetry.Metrics; m != nil {
		mln, err := net.Listen("tcp", m.Listen)
		if err != nil {
			if ln != nil {
				ln.Close()
			}
			logger.Error("listen for metrics (telemetry.metrics.listen)", zap.Error(err))
			return 1
		}
		stop := serveMetrics(ctx, tel, mln, &telemetry.ServeOptions{
			Wrap:        func(h http.Handler) http.Handler { return gw.Protect(m.Listen, h) },
			IdleTimeout: cfg.Gateway.Timeouts.IdleConnection,
		}, logger)
		defer stop()
	}
	logger.Info("starting", zap.String("config", cfg.Source), zap.Int("upstreams", len(cfg.Enabled())))
	gw.Start(ctx)
	defer func() {
		shutdown("stopping upstreams", gw.Close)
		logger.Info("stopped")
	}()

	stopReloads, err := watchReloads(ctx, gw, *cfgPath, logger)
	if err != nil {
		logger.Error("watching the config file", zap.Error(err))
		return 1
	}
	defer stopReloads()

	if *stdio {
		if *toolset != "" {
			ctx = gateway.WithToolset(ctx, *toolset)
		}
		// Direct system calls on stdin and stdout (internal/rawio says why).
		stdin, stdout, restore, raw := rawio.Standard(stdin, stdout)
		defer restore()
		if raw != "" {
			logger.Debug("stdio: direct system calls on " + raw)
		}
		if err := gw.ServeStdio(ctx, stdin, stdout); err != nil {
			return 1
		}
		return 0
	}
	if err := gw.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("serve", zap.Error(err))
		return 1
	}
	return 0
}

// serveMetrics serves /metrics on ln until the returned stop is called,
// which waits for the server to shut down.
func serveMetrics(ctx context.Context, tel *telemetry.Telemetry, ln net.Listener, opts *telemetry.ServeOptions, logger *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := tel.ServeMetrics(ctx, ln, opts); err != nil {
			logger.Error("metrics listener", zap.Error(err))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// watchReloads reloads gw's config when the file at path changes and on
// SIGHUP, until ctx is done or the returned stop is called. Without a path
// (the embedded default) only SIGHUP reloads.
func watchReloads(ctx context.Context, gw *gateway.Gateway, path string, logger *zap.Logger) (stop func(), err error) {
	var changes <-chan struct{}
	var w *config.Watcher
	if path != "" {
		if w, err = config.NewWatcher(path, &config.WatchOptions{Logger: logger}); err != nil {
			return nil, err
		}
		changes = w.Changes()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			trigger := gateway.TriggerFile
			select {
			case <-ctx.Done():
				return
			case <-changes:
			case <-hup:
				trigger = gateway.TriggerSignal
			}
			// The outcome is logged and shown on /status.
			_, _ = gw.Reload(ctx, trigger)
		}
	}()
	return func() {
		cancel()
		<-done
		signal.Stop(hup)
		if w != nil {
			w.Close()
		}
	}, nil
}

// loadConfig loads path, or the embedded default when path is empty.
// ${MANIFOLD_BINARY} resolves to this executable, so the default config can
// start the built-in demo servers.
func loadConfig(path string) (*config.Config, error) {
	opts := &config.LoadOptions{LookupEnv: func(k string) (string, bool) {
		if k == "MANIFOLD_BINARY" {
			if v, ok := os.LookupEnv(k); ok {
				return v, true
			}
			exe, err := os.Executable()
			return exe, err == nil
		}
		return os.LookupEnv(k)
	}}
	if path == "" {
		return config.LoadDefault(opts)
	}
	return config.Load(path, opts)
}

func printConfigError(w io.Writer, err error) {
	if fes := config.FieldErrors(err); len(fes) > 0 {
		fmt.Fprintf(w, "config has %d problem(s):\n", len(fes))
		for _, fe := range fes {
			fmt.Fprintf(w, "  %v\n", fe)
		}
		return
	}
	fmt.Fprintf(w, "manifold: %v\n", err)
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file to validate (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "validate: --config FILE is required")
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err == nil {
		err = gateway.CheckCatalog(cfg)
	}
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	if cfg.Auth.Enabled() {
		// Keys and algorithms only authn can check (PEM contents); no JWKS fetch.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		an, err := authn.New(ctx, &cfg.Auth, nil)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cfg.Source, err)
			return 1
		}
		an.Close()
	}
	fmt.Fprintf(stdout, "%s: valid (%d servers enabled; %s; %s)\n", cfg.Source, len(cfg.Enabled()), authSummary(&cfg.Auth), policySummary(cfg.Policy))
	return 0
}

func authSummary(a *config.Auth) string {
	if !a.Enabled() {
		return "auth off: loopback only"
	}
	var parts []string
	if n := len(a.APIKeys); n > 0 {
		parts = append(parts, fmt.Sprintf("%d API keys", n))
	}
	if a.JWT != nil {
		parts = append(parts, "JWT from "+a.JWT.Issuer)
	}
	return "auth: " + strings.Join(parts, ", ")
}

func policySummary(p *config.Policy) string {
	if p == nil {
		return "no policy: everything allowed"
	}
	return fmt.Sprintf("policy: default %s, %d rules", p.Default, len(p.Rules))
}

// newLogger builds the root logger from gateway.log, writing to file or to
// stderr (never stdout: stdout may carry the stdio protocol). Its level can
// be changed through the returned AtomicLevel.
func newLogger(c config.Log, file string, stderr io.Writer) (*zap.Logger, zap.AtomicLevel, func(), error) {
	level, err := zap.ParseAtomicLevel(c.Level)
	if err != nil {
		return nil, level, nil, fmt.Errorf("gateway.log.level: %w", err)
	}
	var sink zapcore.WriteSyncer = zapcore.AddSync(stderr)
	closeFn := func() {}
	if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, level, nil, fmt.Errorf("log file: %w", err)
		}
		sink = zapcore.Lock(f)
		closeFn = func() { f.Close() }
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder = zapcore.NewJSONEncoder(encCfg)
	if c.Format == "console" {
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	logger := zap.New(zapcore.NewCore(enc, sink, level), zap.ErrorOutput(sink))
	return logger, level, func() { logger.Sync(); closeFn() }, nil
}
