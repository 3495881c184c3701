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
}

// ListPost runs the list_post hooks of the plugins that cover pr over
// items (definitions keyed by keyField: "name", "uri" or "uriTemplate") of
// list (tools, prompts, resources, templates), in priority order. It
// returns the items to list and the renames (new name → listed name; tools
// and prompts only). An item a plugin returns that was not listed to it,
// or a rename onto a name already listed, is refused (dropped and
// logged). A plugin that fails keeps the list unchanged (fail-open) or
// empties it (fail-closed).
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
		cur := e.in.cur.Load()
		if cur != nil && !cur.hooks.has(ListPost) {
			continue
		}
		cfg := e.in.cfg.Load()
		raws := make([]json.RawMessage, len(items))
		for i, it := range items {
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
			next, got, err = decodeList(keyField, items, res.GetPayload(), res.GetRenames())
		}
		if err != nil {
			e.in.log.Warn("list_post failed", zap.String("list", list), zap.Error(err))
			if cfg.OnError == config.PluginFailClosed && cfg.Mode != config.PluginObserve {
				return nil, nil
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
		items = next
	}
	return items, renames
}

// decodeList checks a list_post answer against the items it was given.
func decodeList(keyField string, in []ListItem, payload []byte, renames map[string]string) ([]ListItem, map[string]string, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(payload, &raws); err != nil {
		return nil, nil, fmt.Errorf("items: %w", err)
	}
	listed := make(map[string]bool, len(in))
	for _, it := range in {
		listed[it.Key] = true
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
		case renamed && listed[key]:
			return nil, nil, fmt.Errorf("rename of %q to %q collides with a listed name", from, key)
		case !renamed && !listed[key]:
			return nil, nil, fmt.Errorf("item %q was not listed", key)
		case seen[key]:
			return nil, nil, fmt.Errorf("item %q listed twice", key)
		}
		seen[key] = true
		if renamed {
			kept[key] = from
		}
		out = append(out, ListItem{Key: key, Raw: raw})
	}
	return out, kept, nil
}
