package demo

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestListResources(t *testing.T) {
	cs := connect(t, NewServer("alpha", nil))
	ctx := context.Background()

	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range res.Resources {
		got[r.URI] = r.MIMEType
	}
	want := map[string]string{"demo://alpha/readme": "text/markdown", "demo://alpha/logo": "image/png"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources uri→mimeType (-want +got):\n%s", diff)
	}

	tres, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tres.ResourceTemplates) != 1 || tres.ResourceTemplates[0].URITemplate != "demo://alpha/items/{id}" {
		t.Errorf("resource templates = %+v, want only demo://alpha/items/{id}", tres.ResourceTemplates)
	}
}

func TestReadResource(t *testing.T) {
	tests := []struct {
		name    string
		uri     string
		want    []*mcp.ResourceContents
		wantErr bool
	}{
		{
			name: "readme",
			uri:  "demo://alpha/readme",
			want: []*mcp.ResourceContents{{URI: "demo://alpha/readme", MIMEType: "text/markdown", Text: readmeText("alpha")}},
		},
		{
			name: "logo",
			uri:  "demo://alpha/logo",
			want: []*mcp.ResourceContents{{URI: "demo://alpha/logo", MIMEType: "image/png", Blob: pngBytes()}},
		},
		{
			name: "item from template",
			uri:  "demo://alpha/items/42",
			want: []*mcp.ResourceContents{{URI: "demo://alpha/items/42", MIMEType: "text/plain", Text: "item 42 from alpha"}},
		},
		{name: "unknown resource", uri: "demo://alpha/nope", wantErr: true},
		{name: "other server", uri: "demo://beta/readme", wantErr: true},
		{name: "item without id", uri: "demo://alpha/items/", wantErr: true},
	}
	cs := connect(t, NewServer("alpha", nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: tt.uri})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ReadResource(%s) = %+v, want error", tt.uri, res.Contents)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Contents); diff != "" {
				t.Errorf("contents (-want +got):\n%s", diff)
			}
		})
	}
	if readmeText("alpha") == readmeText("beta") {
		t.Error("readme does not mention the server name")
	}
}

func TestGetPrompt(t *testing.T) {
	readme := &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "demo://alpha/readme", MIMEType: "text/markdown", Text: readmeText("alpha"),
	}}
	tests := []struct {
		name    string
		prompt  string
		args    map[string]string
		want    []*mcp.PromptMessage
		wantErr bool
	}{
		{
			name:   "greet",
			prompt: "greet",
			args:   map[string]string{"person": "bob"},
			want:   []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to bob from alpha."}}},
		},
		{name: "greet without person", prompt: "greet", wantErr: true},
		{
			name:   "summarize without topic",
			prompt: "summarize",
			want: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Summarize the readme of demo server alpha."}},
				{Role: "user", Content: readme},
			},
		},
		{
			name:   "summarize with topic",
			prompt: "summarize",
			args:   map[string]string{"topic": "tools"},
			want: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Summarize the readme of demo server alpha, focusing on tools."}},
				{Role: "user", Content: readme},
			},
		},
		{name: "unknown prompt", prompt: "nope", wantErr: true},
	}
	cs := connect(t, NewServer("alpha", nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: tt.prompt, Arguments: tt.args})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("GetPrompt(%s) = %+v, want error", tt.prompt, res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListPrompts(t *testing.T) {
	cs := connect(t, NewServer("alpha", nil))
	res, err := cs.ListPrompts(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]*mcp.PromptArgument{}
	for _, p := range res.Prompts {
		got[p.Name] = p.Arguments
	}
	want := map[string][]*mcp.PromptArgument{
		"greet":     {{Name: "person", Title: "Person", Description: "who to greet", Required: true}},
		"summarize": {{Name: "topic", Title: "Topic", Description: "what to focus on (optional)"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prompt arguments (-want +got):\n%s", diff)
	}
}

func TestComplete(t *testing.T) {
	greet := &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}
	items := &mcp.CompleteReference{Type: "ref/resource", URI: "demo://alpha/items/{id}"}
	tests := []struct {
		name  string
		ref   *mcp.CompleteReference
		arg   string
		value string
		want  []string
	}{
		{name: "person empty prefix", ref: greet, arg: "person", want: []string{"alice", "bob", "carol"}},
		{name: "person b", ref: greet, arg: "person", value: "b", want: []string{"bob"}},
		{name: "person no match", ref: greet, arg: "person", value: "z"},
		{name: "item id empty prefix", ref: items, arg: "id", want: []string{"1", "2", "7", "42"}},
		{name: "item id 4", ref: items, arg: "id", value: "4", want: []string{"42"}},
		{name: "unknown argument", ref: greet, arg: "topic", value: "a"},
		{name: "unknown prompt", ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "summarize"}, arg: "person"},
		{name: "other server's template", ref: &mcp.CompleteReference{Type: "ref/resource", URI: "demo://beta/items/{id}"}, arg: "id"},
	}
	cs := connect(t, NewServer("alpha", nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.Complete(context.Background(), &mcp.CompleteParams{
				Ref:      tt.ref,
				Argument: mcp.CompleteParamsArgument{Name: tt.arg, Value: tt.value},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Completion.Values, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if res.Completion.HasMore {
				t.Error("hasMore = true, want false")
			}
		})
	}
}
