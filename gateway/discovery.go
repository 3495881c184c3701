package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/discovery"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progressive discovery (docs/architecture.md, Progressive discovery). A
// principal in progressive mode (gateway.discovery) lists three tools of
// the gateway's own instead of the catalog — search, describe and call —
// plus the tools the config keeps listed (always):
//
//   - tools/list and a tools/call of search or describe are answered by
//     discovered, in the interceptor: inside observe, so they get a span,
//     metrics and an audit record under the meta-tool's name like any call;
//   - a tools/call of call is turned into a tools/call of the tool it names,
//     with its arguments, by unwrapCall, a receiving middleware outside
//     observe: from there on it is that call, through every stage of the
//     pipeline (policy, audit, tracing) under the real name, with the
//     answers a direct call gets (a denied or absent name: unknown tool).
//
// The index (package discovery) is built per routing generation and
// discovery config, when the catalog or the config changes, never per
// request (searchIndexFor).

// The names of the meta-tools.
const (
	metaSearch   = "manifold_search_tools"
	metaDescribe = "manifold_describe_tool"
	metaCall     = "manifold_call_tool"
)

// Search limits: the default and the most hits a search returns, and the
// length a hit's description is cut to.
const (
	searchDefaultLimit = 10
	searchMaxLimit     = 50
	searchDescBytes    = 200
)

// metaTools are the meta-tools' definitions, sorted by name.
var metaTools = []*mcp.Tool{
	{
		Name:  metaCall,
		Title: "Call a tool",
		Description: "Calls a tool of this gateway by its name, with its arguments. Find the tool with " +
			metaSearch + " and read its input schema with " + metaDescribe + " first.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":      map[string]any{"type": "string", "description": "The tool's name, as search returned it."},
				"arguments": map[string]any{"type": "object", "description": "The tool's arguments, as its input schema says."},
			},
			"required": []any{"name"},
		},
	},
	{
		Name:        metaDescribe,
		Title:       "Describe a tool",
		Description: "Returns the full definition of a tool of this gateway: its description, input schema, output schema and annotations.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"type": "string", "description": "The tool's name, as search returned it."},
			},
			"required": []any{"name"},
		},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	},
	{
		Name:  metaSearch,
		Title: "Search tools",
		Description: "Searches the tools of this gateway by what they do and returns the best matches, " +
			"each with its name and a short description. Describe in plain words what you want done.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What the tool should do, in plain words."},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": searchMaxLimit,
					"description": fmt.Sprintf("How many tools to return; default %d.", searchDefaultLimit)},
			},
			"required": []any{"query"},
		},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	},
}

// discoveryMode is gateway.discovery compiled, part of a snapshot; nil
// when every principal has full discovery, so that a gateway without it
// pays one nil check per tools/list and tools/call.
type discoveryMode struct {
	progressive bool            // the default mode
	groups      map[string]bool // group → progressive
	always      []policy.Pattern
}

// newDiscoveryMode compiles d; nil when no principal gets progressive
// discovery.
func newDiscoveryMode(d *config.Discovery) *discoveryMode {
	if !d.Progressive() {
		return nil
	}
	m := &discoveryMode{progressive: d.Mode == config.DiscoveryProgressive, groups: map[string]bool{}}
	for g, mode := range d.Groups {
		m.groups[g] = mode == config.DiscoveryProgressive
	}
	for _, p := range d.Always {
		m.always = append(m.always, policy.CompilePattern(p))
	}
	return m
}

// progressiveFor reports whether pr discovers progressively: the mode of
// its groups that gateway.discovery.groups names (full when they
// disagree), else the default.
func (m *discoveryMode) progressiveFor(pr *policy.Principal) bool {
	if m == nil {
		return false
	}
	named, progressive := false, true
	for _, g := range pr.Groups() {
		if p, ok := m.groups[g]; ok {
			named = true
			progressive = progressive && p
		}
	}
	if named {
		return progressive
	}
	return m.progressive
}

// isMeta reports whether name is a meta-tool's while progressive discovery
// is configured: the raw path leaves such calls to the SDK path.
func (m *discoveryMode) isMeta(name string) bool {
	return m != nil && (name == metaSearch || name == metaDescribe || name == metaCall)
}

// progressiveCaller returns the principal of req and whether it discovers
// progressively under the snapshot serving now.
func (g *Gateway) progressiveCaller(ctx context.Context, req mcp.Request) (*snapshot, *policy.Principal, bool) {
	snap := g.current()
	if snap.disc == nil {
		return snap, nil, false
	}
	pr, ok := principal(ctx, snap.access, req)
	return snap, pr, ok && snap.disc.progressiveFor(pr)
}

// unwrapCall is the receiving middleware that turns a progressive
// principal's call of the call meta-tool into the call it names (see the
// comment at the top of this file). It sits outside observe.
func (g *Gateway) unwrapCall(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		cr, ok := req.(*mcp.CallToolRequest)
		if !ok || cr.Params == nil || cr.Params.Name != metaCall {
			return next(ctx, method, req)
		}
		if _, _, progressive := g.progressiveCaller(ctx, req); !progressive {
			return next(ctx, method, req)
		}
		var args struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(orEmpty(cr.Params.Arguments), &args); err != nil || args.Name == "" {
			return toolError(metaCall + `: arguments must be {"name": "<tool>", "arguments": {…}}`), nil
		}
		switch a := bytes.TrimSpace(args.Arguments); {
		case bytes.Equal(a, []byte("null")):
			args.Arguments = nil // as if absent
		case len(a) > 0 && a[0] != '{':
			return toolError(metaCall + ": arguments must be an object"), nil
		}
		params := *cr.Params
		params.Name, params.Arguments = args.Name, args.Arguments
		inner := *cr
		inner.Params = &params
		return next(ctx, method, &inner)
	}
}

// discovered answers, for a progressive principal, tools/list and the
// search and describe meta-tools; handled is false for everything else.
func (g *Gateway) discovered(ctx context.Context, method string, req mcp.Request) (res mcp.Result, handled bool, err error) {
	if method != "tools/list" && method != "tools/call" {
		return nil, false, nil
	}
	snap, pr, progressive := g.progressiveCaller(ctx, req)
	if !progressive {
		return nil, false, nil
	}
	switch req := req.(type) {
	case *mcp.ListToolsRequest:
		r := &mcp.ListToolsResult{Cacheable: mcp.Cacheable{CacheScope: "private"}}
		r.Tools, r.NextCursor, err = page(g.progressiveList(snap, pr), func(t *mcp.Tool) string { return t.Name }, cursor(req.Params))
		return r, true, err
	case *mcp.CallToolRequest:
		if req.Params == nil {
			return nil, false, nil
		}
		switch req.Params.Name {
		case metaSearch:
			g.exchange(ctx).decide(snap.access.policy, policy.Decision{Allowed: true, Rule: -1})
			return g.searchTools(snap, pr, req.Params.Arguments), true, nil
		case metaDescribe:
			g.exchange(ctx).decide(snap.access.policy, policy.Decision{Allowed: true, Rule: -1})
			return g.describeTool(snap, pr, req.Params.Arguments), true, nil
		}
	}
	return nil, false, nil
}

// progressiveList is what a progressive principal lists: the meta-tools
// and the always tools it may use, sorted by name.
func (g *Gateway) progressiveList(snap *snapshot, pr *policy.Principal) []*mcp.Tool {
	si := g.searchIndexFor(snap)
	out := slices.Clone(metaTools)
	for _, i := range si.always {
		if si.allowed(snap, pr, i) {
			out = append(out, si.routes.toolDefs[i])
		}
	}
	slices.SortFunc(out, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b *mcp.Tool) bool { return a.Name == b.Name })
}

// searchHit is one tool a search returns.
type searchHit struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// searchTools answers the search meta-tool: the best matches among the
// tools pr may use.
func (g *Gateway) searchTools(snap *snapshot, pr *policy.Principal, raw json.RawMessage) *mcp.CallToolResult {
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(orEmpty(raw), &args); err != nil {
		return toolError(metaSearch + `: arguments must be {"query": "<words>", "limit": <n>}`)
	}
	limit := args.Limit
	if limit <= 0 {
		limit = searchDefaultLimit
	}
	limit = min(limit, searchMaxLimit)
	si := g.searchIndexFor(snap)
	hits := si.index.Search(discovery.ParseQuery(args.Query), limit, func(i int) bool { return si.allowed(snap, pr, i) })
	found := make([]searchHit, 0, len(hits))
	var text strings.Builder
	for _, h := range hits {
		t := si.routes.toolDefs[h.Doc]
		hit := searchHit{Name: t.Name, Title: t.Title, Description: shorten(t.Description, searchDescBytes)}
		found = append(found, hit)
		fmt.Fprintf(&text, "%s: %s\n", hit.Name, hit.Description)
	}
	if len(found) == 0 {
		text.WriteString("No tool matches. Try other words for what you want done.")
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text.String()}},
		StructuredContent: map[string]any{"tools": found},
	}
}

// describeTool answers the describe meta-tool: the definition of a tool
// pr may use, or for any other name the answer a call of it would get.
func (g *Gateway) describeTool(snap *snapshot, pr *policy.Principal, raw json.RawMessage) *mcp.CallToolResult {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(orEmpty(raw), &args); err != nil || args.Name == "" {
		return toolError(metaDescribe + `: arguments must be {"name": "<tool>"}`)
	}
	si := g.searchIndexFor(snap)
	i, ok := si.byName[args.Name]
	if !ok || !si.allowed(snap, pr, i) {
		return toolError(unknownTool(args.Name).Error()) // the same for denied and absent names
	}
	t := si.routes.toolDefs[i]
	b, err := json.Marshal(t)
	if err != nil {
		return toolError(fmt.Sprintf("%s: %v", metaDescribe, err))
	}
	var structured map[string]any
	_ = json.Unmarshal(b, &structured) // b is an object: cannot fail
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: structured,
	}
}

// toolError is a tool result with isError and text.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// orEmpty returns raw, or an empty object for absent arguments.
func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return json.RawMessage("{}")
	}
	return raw
}

// shorten returns s's first sentence, or at most n bytes of it, cut at a
// rune boundary.
func shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 && i < n {
		return s[:i+1]
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
