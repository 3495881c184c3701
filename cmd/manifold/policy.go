package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
)

const policyUsage = `Usage:
  manifold policy explain --config FILE --principal NAME [--group G]...
                          (--tool NAME | --prompt NAME | --resource URI | --template URI)
                          [--server NAME]

Prints the decision for the principal and the rule that made it. Names and
URIs are written as clients see them (everything__echo, manifold://memory/…).
Without --group, the groups are those of the principal's API keys in the
config (or of auth.local). Without --server, the server is found from the
name's prefix. Names are those after the overrides of mcpServers.<name>.tools
and .prompts: a renamed item is decided on under its new name (the line
"upstream" names the item it stands for); its old name, and a hidden item's,
are denied (clients never see them).

Exit status: 0 allowed, 1 denied, 2 usage or config error.
`

// policyCmd runs `manifold policy …`.
func policyCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	fs := flag.NewFlagSet("policy explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	cfgPath := fs.String("config", "", "config file (YAML or JSON); default: the embedded demo config")
	principal := fs.String("principal", "", "principal name")
	var groups stringList
	fs.Var(&groups, "group", "a group of the principal (repeatable)")
	server := fs.String("server", "", "the server of the item (default: from its prefix)")
	items := map[policy.Kind]*string{
		policy.Tool:     fs.String("tool", "", "tool name"),
		policy.Prompt:   fs.String("prompt", "", "prompt name"),
		policy.Resource: fs.String("resource", "", "resource URI"),
		policy.Template: fs.String("template", "", "resource template URI"),
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var kind policy.Kind
	var name string
	n := 0
	for k, v := range items {
		if *v != "" {
			kind, name, n = k, *v, n+1
		}
	}
	if *principal == "" || n != 1 || fs.NArg() > 0 {
		fmt.Fprint(stderr, "manifold policy explain: need --principal and exactly one of --tool, --prompt, --resource, --template\n\n"+policyUsage)
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		printConfigError(stderr, err)
		return 2
	}

	groupSource := "--group"
	if len(groups) == 0 {
		groups, groupSource = configGroups(cfg, *principal)
	}
	srv, srvSource := *server, "--server"
	if srv == "" {
		srv, srvSource = itemServer(cfg, kind, name), "from the name"
		if srv == "" {
			srvSource = "no configured server matches"
		}
	}
	pol := policy.Compile(cfg.Policy)
	pr := policy.NewPrincipal(*principal, groups)
	d := pol.Decide(pr, kind, name, srv)
	renamed, gone := catalogNote(cfg, kind, name, srv)
	by := pol.Describe(d)
	if gone != "" {
		d.Allowed, by = false, gone
	}

	verdict := "deny"
	if d.Allowed {
		verdict = "allow"
	}
	fmt.Fprintf(stdout, "principal  %s (groups: %s; %s)\n", pr.Name(), orNone(strings.Join(pr.Groups(), ", ")), groupSource)
	fmt.Fprintf(stdout, "%-10s %s (server: %s; %s)\n", kind.String(), name, orNone(srv), srvSource)
	if renamed != "" {
		fmt.Fprintf(stdout, "upstream   %s\n", renamed)
	}
	fmt.Fprintf(stdout, "decision   %s\n", verdict)
	fmt.Fprintf(stdout, "by         %s\n", by)
	if d.Allowed {
		return 0
	}
	return 1
}

// configGroups returns the groups the config gives a principal: those of its
// API keys, or of auth.local.
func configGroups(cfg *config.Config, name string) ([]string, string) {
	var groups []string
	found := false
	for _, k := range cfg.Auth.APIKeys {
		if k.Name == name {
			groups, found = append(groups, k.Groups...), true
		}
	}
	switch {
	case found:
		return groups, "from auth.apiKeys"
	case name == cfg.Auth.Local.Name:
		return cfg.Auth.Local.Groups, "from auth.local"
	}
	return nil, "not in the config; pass --group for JWT principals"
}

// itemServer finds the server of a name or URI as clients see it, from its
// namespace; "" when none matches.
func itemServer(cfg *config.Config, kind policy.Kind, name string) string {
	sep := cfg.Gateway.Separator
	var unprefixed []string
	best, bestLen := "", -1
	for _, s := range cfg.Enabled() {
		ns := s.Namespace()
		if ns == "" {
			unprefixed = append(unprefixed, s.Name)
			continue
		}
		var match bool
		switch kind {
		case policy.Tool, policy.Prompt:
			match = strings.HasPrefix(name, ns+sep)
		default:
			prefix, _, ok := namespacing.UnwrapURI(name)
			match = ok && prefix == ns
		}
		if match && len(ns) > bestLen {
			best, bestLen = s.Name, len(ns)
		}
	}
	if best == "" && len(unprefixed) == 1 {
		return unprefixed[0]
	}
	return best
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if !slices.Contains(*l, v) {
		*l = append(*l, v)
	}
	return nil
}
