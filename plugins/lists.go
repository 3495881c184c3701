package plugins

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"github.com/manifold-mcp/manifold/policy"
	"go.uber.org/zap"
)

// Lists reports whether some plugin of c may rewrite lists (list_post):
// the gateway then lists per principal through ListPost.
func (c *Chain) Lists() bool { return c != nil && c.lists }

// ListItem is one entry of a list as ListPost returns it: its definition
// and its key (a tool's or prompt's name, a resource's URI, a template's
// URI template).
type ListItem struct {
	Key string
	Raw json.RawMessage
	// Server is the item's upstream server, for the plugins' match.
	Server string
}

// listKinds are the kinds plugins' matches see list items as.
var listKinds = map[string]policy.Kind{"tools": policy.Tool, "prompts": policy.Prompt, "resources": policy.Resource, "templates": policy.Resource}

// ListPost runs the list_post hooks of the plugins that cover pr over
// items (definitions keyed by keyField: "name", "uri" or "uriTemplate") of
// list (tools, prompts, resources, templates), in priority order; each
// plugin sees the items its match covers, and the others stay as they
// are. It
// returns the items to list and the renames (new name → listed name; tools
// and prompts only). An item a plugin returns that was not listed to it,
// or a rename onto a name already listed, is refused (the plugin's answer
// is treated as a failure, logged). A plugin that fails leaves the items it
// covers unchanged (fail-open) or hides them (fail-closed).
func (c *Chain) ListPost(ctx context.Context, list, keyField string, pr *policy.Principal, items []ListItem) ([]ListItem, map[string]string) {
	if c == nil {
		return items, nil
	}
	renames := map[string]string{}
	pc := &proto.Context{List: list}
	if pr != nil {
		pc.Principal, pc.Groups = pr.Name(), pr.Groups()
	}
	for _, e := range c.entries {
		if !e.anyone && !e.principals.Contains(pr) {
			continue
		}
		if !e.in.covers(ListPost) {
			continue
		}
		cfg := e.in.cfg.Load()
		var covered, rest []ListItem
		for _, it := range items {
			t := Target{Kind: listKinds[list], Server: it.Server, Name: it.Key, Principal: pr}
			if e.matches(&t) {
				covered = append(covered, it)
			} else {
				rest = append(rest, it)
			}
		}
		if len(covered) == 0 {
			continue
		}
		raws := make([]json.RawMessage, len(covered))
		for i, it := range covered {
			raws[i] = it.Raw
		}
		payload, _ := json.Marshal(raws)
		res, err := c.host.call(ctx, e, ListPost, pc, payload)
		if err == nil && res.GetAction() != proto.HookResponse_MODIFY {
			continue
		}
		var next []ListItem
		var got map[string]string
		if err == nil {
			next, got, err = decodeList(keyField, covered, rest, res.GetPayload(), res.GetRenames())
		}
		if err != nil {
			e.in.log.Warn("list_post failed", zap.String("list", list), zap.Error(err))
			if cfg.OnError == config.PluginFailClosed && cfg.Mode != config.PluginObserve {
				items = rest // what it covers is hidden while it fails
			}
			continue
		}
		if cfg.Mode == config.PluginObserve {
			e.in.log.Info("observe mode: plugin would have changed the list", zap.String("list", list), zap.Int("items", len(next)))
			continue
		}
		for n, o := range got {
			if first, ok := renames[o]; ok { // a rename of a rename
				o = first
				delete(renames, got[n])
			}
			renames[n] = o
		}
		items = append(next, rest...)
	}
	return items, renames
}

// decodeList checks a list_post answer against the items it was given
// (in); rest are the items of the list it was not given.
func decodeList(keyField string, in, rest []ListItem, payload []byte, renames map[string]string) ([]ListItem, map[string]string, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(payload, &raws); err != nil {
		return nil, nil, fmt.Errorf("items: %w", err)
	}
	listed := make(map[string]bool, len(in))
	server := make(map[string]string, len(in))
	for _, it := range in {
		listed[it.Key], server[it.Key] = true, it.Server
	}
	others := make(map[string]bool, len(rest))
	for _, it := range rest {
		others[it.Key] = true
	}
	if keyField != "name" && len(renames) > 0 {
		return nil, nil, fmt.Errorf("renames apply to tools and prompts only")
	}
	out := make([]ListItem, 0, len(raws))
	seen := map[string]bool{}
	kept := map[string]string{}
	for _, raw := range raws {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, fmt.Errorf("item: %w", err)
		}
		var key string
		if err := json.Unmarshal(m[keyField], &key); err != nil || key == "" {
			return nil, nil, fmt.Errorf("item without %s", keyField)
		}
		from, renamed := renames[key]
		switch {
		case renamed && !listed[from]:
			return nil, nil, fmt.Errorf("rename of %q, which was not listed", from)
		case renamed && (listed[key] || others[key]):
			return nil, nil, fmt.Errorf("rename of %q to %q collides with a listed name", from, key)
		case !renamed && !listed[key]:
			return nil, nil, fmt.Errorf("item %q was not listed", key)
		case seen[key]:
			return nil, nil, fmt.Errorf("item %q listed twice", key)
		}
		seen[key] = true
		srv := server[key]
		if renamed {
			kept[key], srv = from, server[from]
		}
		out = append(out, ListItem{Key: key, Raw: raw, Server: srv})
	}
	return out, kept, nil
}
