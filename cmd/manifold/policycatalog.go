package main

import (
	"fmt"
	"slices"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
)

// catalogNote is what the overrides of the config say about a tool or
// prompt name as written to `policy explain`: renamed is a line naming the
// upstream item a renamed name stands for; gone, when set, says why clients
// never see the name at all (it is an item's name before its rename, or a
// hidden item's), which the gateway answers as unknown whatever the policy.
func catalogNote(cfg *config.Config, kind policy.Kind, name, server string) (renamed, gone string) {
	if kind != policy.Tool && kind != policy.Prompt || server == "" {
		return "", ""
	}
	s, ok := cfg.Servers[server]
	if !ok {
		return "", ""
	}
	s.Name = server
	set, word := s.Tools, "tool"
	if kind == policy.Prompt {
		set, word = s.Prompts, "prompt"
	}
	opts := namespacing.Options{Separator: cfg.Gateway.Separator, MaxLength: cfg.Gateway.MaxToolNameLength, Kind: word}
	ns := s.Namespace()
	section := cfg.ServersKey
	if section == "" {
		section = "mcpServers"
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, upstream := range names {
		ov := set[upstream]
		key := fmt.Sprintf("%s.%s.%ss.%s", section, server, word, upstream)
		before := namespacing.Name(ns, upstream, opts)
		switch {
		case ov.Hide && before == name:
			return "", fmt.Sprintf("%s.hide: clients never see this %s; calls to it are answered as unknown", key, word)
		case ov.Rename == nil:
			continue
		case namespacing.Name(ns, *ov.Rename, opts) == name:
			renamed = fmt.Sprintf("%s %q of server %s, renamed (%s.rename)", word, upstream, server, key)
		case before == name:
			gone = fmt.Sprintf("%s.rename: renamed to %s; clients never see this name and calls to it are answered as unknown",
				key, namespacing.Name(ns, *ov.Rename, opts))
		}
	}
	if gone != "" {
		renamed = "" // an upstream name that another item's rename took is still not this item
	}
	return renamed, gone
}
