// Package demo implements the built-in demo MCP server that `manifold demo-server`
// runs and that integration tests use as an upstream fixture. Its tools,
// resources, resource template, prompts and completions are deterministic:
// results depend only on the server name and the request (the info tool also
// reports the process id, working directory and $DEMO_VALUE).
package demo

import (
	"fmt"
	"strings"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the version the demo server reports in its implementation info.
const Version = "v0.1.0"

// Options configures optional features of the demo server. A nil *Options is
// the same as the zero value.
type Options struct {
	// LongNames also registers the tool [LongToolName], whose name is 80
	// characters long, to exercise tool-name shortening. Default false.
	LongNames bool
	// ExtraTools are names of extra trivial tools that return their own name as
	// text, to exercise name collisions and list_changed handling. Empty names
	// are skipped; a name equal to a built-in tool replaces that tool.
	ExtraTools []string
}

// NewServer returns the demo MCP server named name (for example "alpha"); opts
// may be nil. The name appears in instructions, results and resource URIs
// (demo://<name>/...), so it must be non-empty and consist only of ASCII
// letters, digits, '.', '_' and '-'; NewServer panics otherwise (use
// [ValidateName] to check user input first).
//
// The returned server may serve any number of sessions concurrently.
func NewServer(name string, opts *Options) *mcp.Server {
	if err := ValidateName(name); err != nil {
		panic(err)
	}
	if opts == nil {
		opts = &Options{}
	}
	s := mcp.NewServer(&mcp.Implementation{
		Name:    name,
		Title:   "Manifold demo server " + name,
		Version: Version,
	}, &mcp.ServerOptions{
		Instructions:      "Demo server " + name + ": echo, add, image and more.",
		CompletionHandler: completionHandler(name),
	})
	addTools(s, name, opts)
	addResources(s, name)
	addPrompts(s, name)
	// Added last so that it is the outermost middleware and also sees panics
	// from the SDK's own method handlers.
	s.AddReceivingMiddleware(mcpx.Recover(nil))
	return s
}

// ValidateName reports whether name can be used as a demo server name: it
// must be non-empty and consist only of ASCII letters, digits, '.', '_' and
// '-', so that demo://<name>/... is a valid URI.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("demo: server name must not be empty")
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !validNameRune(r) }); i >= 0 {
		return fmt.Errorf("demo: server name %q: invalid character %q", name, name[i])
	}
	return nil
}

func validNameRune(r rune) bool {
	return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') ||
		r == '.' || r == '_' || r == '-'
}
