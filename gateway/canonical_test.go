package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// looseServer answers every demo:// URI, as a server that resolves URIs
// loosely would, and lists one URI that a WHATWG parser rewrites
// ("https://example.com" is "https://example.com/" to new URL()).
func looseServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "loose"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"x"}}}, nil
		},
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "content of " + req.Params.URI}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "demo://resource/static/document/architecture.md", Name: "doc"}, read)
	s.AddResource(&mcp.Resource{URI: "https://example.com", Name: "site"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "demo://resource/{+rest}", Name: "any"}, read)
	return s
}

// TestNonCanonicalURIsAreUnknown: with or without a policy, a URI that is
// not in canonical form is answered as a resource that does not exist (a
// subscription to it is acknowledged and never made, a completion on it
// refused), and its upstream hears nothing of it; a URI the upstream lists
// stays readable as listed, and only as listed.
func TestNonCanonicalURIsAreUnknown(t *testing.T) {
	const doc = "manifold://loose/demo://resource/static/document/architecture.md"
	aliases := []string{
		doc + "\t", doc + " ", doc + "\x01", doc + "\n",
		"manifold://loose/DEMO://resource/static/document/architecture.md",
		"MANIFOLD://loose/demo://resource/static/document/architecture.md",
		"manifold://loose/demo://@resource/static/document/architecture.md",
		"manifold://loose/demo://:@resource/static/document/architecture.md",
		"manifold://loose/demo://resource:/static/document/architecture.md",
		"manifold://loose/demo://resource/static/.\t./static/document/architecture.md",
		"manifold://loose/demo://resource/static/%2e%2e/static/document/architecture.md",
		"manifold://loose/demo://resource/static/document/%61rchitecture.md",
		"manifold://loose/demo://resource/static\\document\\architecture.md",
		"manifold://loose/https://EXAMPLE.com",
	}
	for _, tc := range []struct {
		name   string
		policy *config.Policy
	}{
		{name: "no policy"},
		{name: "policy allowing the document", policy: &config.Policy{Default: config.Deny, Rules: []config.Rule{
			{Effect: config.Allow, Match: config.Match{Resources: []string{"manifold://loose/*"}}},
		}}},
		{name: "policy denying the site", policy: &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Resources: []string{"manifold://loose/https://example.com"}}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, func(c *config.Config) { c.Policy = tc.policy },
				upstreamSpec{name: "loose", server: looseServer()})
			ctx := context.Background()
			up := h.ups["loose"]
			_, unknown := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://nobody/x"})
			before := up.calls.Load()
			for _, uri := range aliases {
				n := up.calls.Load()
				res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err == nil {
					t.Errorf("resources/read %q succeeded: %q", uri, textOfResource(res))
					continue
				}
				if rpcCode(err) != rpcCode(unknown) || !strings.Contains(err.Error(), "Resource not found") {
					t.Errorf("resources/read %q: %v, want the answer for an unknown URI (%v)", uri, err, unknown)
				}
				if up.calls.Load() != n {
					t.Errorf("resources/read %q reached the upstream", uri)
				}
			}
			// Subscriptions and completions hear nothing of them either.
			legacy := h.connectVersion(t, "2025-11-25")
			for _, uri := range aliases {
				if err := legacy.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Errorf("resources/subscribe %q: %v, want the silent acknowledgement", uri, err)
				}
			}
			for _, ref := range []string{"manifold://loose/DEMO://resource/{+rest}", "manifold://loose/demo://@resource/{+rest}",
				"manifold://loose/demo://resource/{+rest}\t", "manifold://loose/demo://resource/./{+rest}"} {
				if _, err := h.client.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: ref},
					Argument: mcp.CompleteParamsArgument{Name: "rest", Value: "x"}}); err == nil {
					t.Errorf("completion/complete on %q succeeded", ref)
				}
			}
			if n := up.calls.Load() - before; n != 0 {
				t.Errorf("the upstream received %d requests for non-canonical URIs", n)
			}
			if tc.policy == nil || tc.policy.Default == config.Allow { // templates allowed
				if _, err := h.client.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "manifold://loose/demo://resource/{+rest}"},
					Argument: mcp.CompleteParamsArgument{Name: "rest", Value: "x"}}); err != nil {
					t.Errorf("completion/complete on the listed template: %v", err)
				}
			}
			readable := []string{doc, "manifold://loose/demo://resource/dynamic/7?x=1"}
			site := []string{"manifold://loose/https://example.com", "manifold://loose/https://example.com/"}
			if tc.policy != nil && tc.policy.Default == config.Allow {
				// The listed spelling and the canonical one are denied alike.
				for _, uri := range site {
					if res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
						t.Errorf("resources/read %q of the denied site succeeded: %q", uri, textOfResource(res))
					}
				}
			} else {
				readable = append(readable, site[0])
			}
			for _, uri := range readable {
				if res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil || !strings.HasPrefix(textOfResource(res), "content of ") {
					t.Errorf("resources/read %q: %v %v", uri, res, err)
				}
			}
		})
	}
}
