package upstream

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxPages bounds one listing, against a server that keeps returning cursors.
const maxPages = 10000

// Catalog is an immutable snapshot of what one upstream offers. A new
// Catalog replaces the old one on every refresh; never modify one.
type Catalog struct {
	Tools        []*mcp.Tool
	Prompts      []*mcp.Prompt
	Resources    []*mcp.Resource
	Templates    []*mcp.ResourceTemplate
	Instructions string
	ServerInfo   *mcp.Implementation
	Capabilities *mcp.ServerCapabilities
	// ProtocolVersion is the version negotiated with the upstream.
	ProtocolVersion string
}

// kind is a bit set of the lists to (re)fetch.
type kind uint32

const (
	kindTools kind = 1 << iota
	kindPrompts
	kindResources // resources and templates
	kindAll       = kindTools | kindPrompts | kindResources
)

// fetchCatalog lists what the session's server advertises. Lists of kinds
// not in k are copied from prev.
func fetchCatalog(ctx context.Context, cs *mcp.ClientSession, prev *Catalog, k kind) (*Catalog, error) {
	init := cs.InitializeResult()
	c := &Catalog{
		Instructions:    init.Instructions,
		ServerInfo:      init.ServerInfo,
		Capabilities:    init.Capabilities,
		ProtocolVersion: init.ProtocolVersion,
	}
	if prev != nil {
		c.Tools, c.Prompts, c.Resources, c.Templates = prev.Tools, prev.Prompts, prev.Resources, prev.Templates
	}
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	var err error
	if k&kindTools != 0 && caps.Tools != nil {
		if c.Tools, err = listAll(ctx, "tools/list", func(cur string) ([]*mcp.Tool, string, error) {
			r, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cur})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	if k&kindPrompts != 0 && caps.Prompts != nil {
		if c.Prompts, err = listAll(ctx, "prompts/list", func(cur string) ([]*mcp.Prompt, string, error) {
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cur})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	if k&kindResources != 0 && caps.Resources != nil {
		if c.Resources, err = listAll(ctx, "resources/list", func(cur string) ([]*mcp.Resource, string, error) {
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cur})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
		if c.Templates, err = listAll(ctx, "resources/templates/list", func(cur string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cur})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// listAll follows cursors until the last page. A repeated cursor or more
// than maxPages pages is an error rather than an endless loop.
func listAll[T any](ctx context.Context, method string, page func(cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	seen := map[string]bool{}
	cursor := ""
	for i := 0; ; i++ {
		if i == maxPages {
			return nil, fmt.Errorf("%s: more than %d pages", method, maxPages)
		}
		items, next, err := page(cursor)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%s: server repeated cursor %q", method, next)
		}
		seen[next] = true
		cursor = next
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
