package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/pins"
)

const pinsUsage = `Usage:
  manifold pins list    (--config FILE | --file PINS) [--server S] [--tool T] [--prompt P]
  manifold pins diff    (--config FILE | --file PINS) [--server S] [--tool T] [--prompt P]
  manifold pins approve (--config FILE | --file PINS) [--server S] [--tool T] [--prompt P]

The pin file records the tool and prompt definitions each pinning server
served when they were approved (gateway.pinning in the config). list shows
every pin and its state: approved, changed (the server now serves another
definition, pending approval) or held (never approved). diff shows, field by
field, what changed. approve makes the pending definitions the approved
ones; a running gateway watches the file and applies the approval at once.
With gateway.pinning.store: cluster (several replicas) --config works on the
pins in the cluster's shared store, and every replica applies the approval
within a few seconds.
--tool and --prompt name items as the upstream serves them (echo, not
everything__echo).

Exit status: 0 done (diff: no pending change), 1 diff found changes or
approve found nothing to approve, 2 usage, config or file error.
`

// pinsCmd runs `manifold pins …`.
func pinsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "diff" && args[0] != "approve") {
		fmt.Fprint(stderr, pinsUsage)
		return 2
	}
	fs := flag.NewFlagSet("pins "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, pinsUsage) }
	cfgPath := fs.String("config", "", "config file whose gateway.pinning.file is the pin file")
	file := fs.String("file", "", "the pin file (instead of --config)")
	var f pins.Filter
	fs.StringVar(&f.Server, "server", "", "only this server's pins")
	fs.StringVar(&f.Tool, "tool", "", "only this tool (its upstream name)")
	fs.StringVar(&f.Prompt, "prompt", "", "only this prompt (its upstream name)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if (*cfgPath == "") == (*file == "") || fs.NArg() > 0 {
		fmt.Fprint(stderr, "manifold pins: need exactly one of --config and --file\n\n"+pinsUsage)
		return 2
	}
	path := *file
	var store pins.Store
	if *cfgPath != "" {
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			printConfigError(stderr, err)
			return 2
		}
		if cfg.Gateway.Pinning.Store == config.StoreCluster {
			kv, err := openSharedStore(cfg)
			if err != nil {
				fmt.Fprintf(stderr, "manifold pins: %v\n", err)
				return 1
			}
			defer kv.Close()
			store = pins.NewSharedStore(kv)
		} else if path = cfg.Gateway.Pinning.File; path == "" {
			fmt.Fprintf(stderr, "manifold pins: %s sets no gateway.pinning.file or store\n", *cfgPath)
			return 2
		}
	}
	if store == nil {
		store = pins.NewFileStore(path)
	}
	var n int
	var err error
	switch args[0] {
	case "list":
		var s *pins.Set
		if s, err = store.Load(ctx); err == nil {
			err = pins.WriteList(stdout, s, f)
			n = 1
		}
	case "diff":
		var s *pins.Set
		if s, err = store.Load(ctx); err == nil {
			n, err = pins.WriteDiffs(stdout, s, f)
			if n == 0 && err == nil {
				fmt.Fprintln(stdout, "no pending change")
				return 0
			}
			n = 0 // changes found: exit 1, as diff(1)
		}
	case "approve":
		if n, err = pins.ApproveIn(ctx, store, f, stdout); err == nil && n == 0 {
			fmt.Fprintln(stderr, "manifold pins approve: nothing pending matches")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "manifold pins: %v\n", err)
		return 2
	}
	if n == 0 {
		return 1
	}
	return 0
}
