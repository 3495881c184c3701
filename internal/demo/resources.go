package demo

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngBase64 is a valid 1x1 PNG (one opaque blue-grey pixel).
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAAEElEQVR4nGIyTpsJCAAA//8CCgE1Qf2clwAAAABJRU5ErkJggg=="

// pngBytes returns a fresh copy of the demo PNG, so callers may not alias it.
func pngBytes() []byte {
	b, err := base64.StdEncoding.DecodeString(pngBase64)
	if err != nil {
		panic(err) // constant input
	}
	return b
}

func pngDataURI() string { return "data:image/png;base64," + pngBase64 }

func readmeURI(name string) string     { return "demo://" + name + "/readme" }
func logoURI(name string) string       { return "demo://" + name + "/logo" }
func itemsPrefix(name string) string   { return "demo://" + name + "/items/" }
func itemsTemplate(name string) string { return itemsPrefix(name) + "{id}" }
func itemURI(name, id string) string   { return itemsPrefix(name) + id }
func itemText(name, id string) string  { return "item " + id + " from " + name }
func readmeText(name string) string {
	return "# Demo server " + name + "\n\n" +
		"This is the readme of the Manifold demo server " + name + ".\n" +
		"Tools: echo, add, image, fail, slow, info, link, annotated, meta.\n"
}

func addResources(s *mcp.Server, name string) {
	s.AddResource(&mcp.Resource{
		URI:         readmeURI(name),
		Name:        "readme",
		Title:       "Readme",
		Description: "A short readme of demo server " + name + ".",
		MIMEType:    "text/markdown",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI:      readmeURI(name),
			MIMEType: "text/markdown",
			Text:     readmeText(name),
		}}}, nil
	})

	s.AddResource(&mcp.Resource{
		URI:         logoURI(name),
		Name:        "logo",
		Title:       "Logo",
		Description: "A tiny PNG logo.",
		MIMEType:    "image/png",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI:      logoURI(name),
			MIMEType: "image/png",
			Blob:     pngBytes(),
		}}}, nil
	})

	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: itemsTemplate(name),
		Name:        "item",
		Title:       "Item",
		Description: "Item {id} of demo server " + name + ".",
		MIMEType:    "text/plain",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, ok := strings.CutPrefix(uri, itemsPrefix(name))
		if !ok || id == "" || strings.ContainsAny(id, "/?#") {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI:      uri,
			MIMEType: "text/plain",
			Text:     itemText(name, id),
		}}}, nil
	})
}
