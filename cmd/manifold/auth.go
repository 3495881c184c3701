package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/manifold-mcp/manifold/internal/upcred"
)

const authUsage = `Usage:
  manifold auth list   --config FILE [--principal NAME] [--server NAME] [--json]
  manifold auth revoke --config FILE --principal NAME [--server NAME]

Lists or removes the upstream tokens the gateway keeps per principal and
server in gateway.tokenStore (an encrypted file, or with store: cluster
sealed keys in the cluster's shared store). list never prints a token.
revoke removes the principal's token for --server, or for every server: the
next request of that principal needs a new one. A running gateway sees the
change at its next request to that upstream.

Exit status: 0 done, 1 store error (or revoke found nothing), 2 usage or config error.
`

// authCmd runs `manifold auth …`.
func authCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "revoke") {
		fmt.Fprint(stderr, authUsage)
		return 2
	}
	fs := flag.NewFlagSet("auth "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, authUsage) }
	cfgPath := fs.String("config", "", "config file (YAML or JSON)")
	principal := fs.String("principal", "", "principal name")
	server := fs.String("server", "", "server name (default every server)")
	asJSON := fs.Bool("json", false, "print JSON lines (list)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *cfgPath == "" || fs.NArg() > 0 || (args[0] == "revoke" && *principal == "") {
		fmt.Fprint(stderr, "manifold auth: need --config (and --principal to revoke)\n\n"+authUsage)
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		printConfigError(stderr, err)
		return 2
	}
	if cfg.Gateway.TokenStore.File == "" && cfg.Gateway.TokenStore.Store == "" {
		fmt.Fprintln(stderr, "manifold auth: the config has no gateway.tokenStore.file or store: tokens are kept in the gateway's memory only")
		return 2
	}
	store, closeStore, err := openTokenStore(cfg)
	if closeStore != nil {
		defer closeStore()
	}
	if err != nil {
		fmt.Fprintf(stderr, "manifold auth: %v\n", err)
		return 1
	}
	if args[0] == "revoke" {
		n, err := store.Revoke(ctx, *principal, *server)
		if err != nil {
			fmt.Fprintf(stderr, "manifold auth: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "revoked %d token(s) of %s\n", n, *principal)
		if n == 0 {
			return 1
		}
		return 0
	}
	entries, err := store.List(ctx, *principal)
	if err != nil {
		fmt.Fprintf(stderr, "manifold auth: %v\n", err)
		return 1
	}
	if *server != "" {
		entries = slices.DeleteFunc(entries, func(e upcred.Entry) bool { return e.Server != *server })
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, e := range entries {
			_ = enc.Encode(e)
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tSERVER\tEXPIRES\tREFRESHABLE\tSCOPES")
	for _, e := range entries {
		exp := "never"
		if !e.Expiry.IsZero() {
			exp = e.Expiry.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%v\n", e.Principal, e.Server, exp, e.Refreshable, e.Scopes)
	}
	_ = tw.Flush()
	return 0
}
