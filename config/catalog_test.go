package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCatalog(t *testing.T) {
	const doc = `
mcpServers:
  everything:
    command: npx
    tools:
      echo: { rename: say, description: "Repeat a message back.", appendDescription: "(team)" }
      get-env: { hide: true }
      get-sum: { title: Sum, annotations: { readOnlyHint: true, title: Adder } }
    prompts:
      simple-prompt: { rename: simple, title: Simple }
toolsets:
  dev: { servers: [everything], tools: ["!*__delete_*"] }
  support: { tools: ["everything__echo"], prompts: ["*"], resources: [] }
`
	cfg, err := Parse([]byte(doc), "yaml", "test.yaml", &LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers["everything"]
	wantTools := map[string]Override{
		"echo":    {Rename: ptr("say"), Description: ptr("Repeat a message back."), AppendDescription: ptr("(team)")},
		"get-env": {Hide: true},
		"get-sum": {Title: ptr("Sum"), Annotations: &Annotations{Title: ptr("Adder"), ReadOnlyHint: ptr(true)}},
	}
	if d := cmp.Diff(wantTools, s.Tools); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]Override{"simple-prompt": {Rename: ptr("simple"), Title: ptr("Simple")}}, s.Prompts); d != "" {
		t.Errorf("prompts (-want +got):\n%s", d)
	}
	wantSets := map[string]Toolset{
		"dev":     {Name: "dev", Servers: []string{"everything"}, Tools: []string{"!*__delete_*"}},
		"support": {Name: "support", Tools: []string{"everything__echo"}, Prompts: []string{"*"}, Resources: []string{}},
	}
	if d := cmp.Diff(wantSets, cfg.Toolsets); d != "" {
		t.Errorf("toolsets (-want +got):\n%s", d)
	}
	if cfg.Toolsets["dev"].Resources != nil {
		t.Error("an absent resources key must stay nil (every resource), not []")
	}
}

func TestValidateCatalog(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []wantErr
	}{
		{
			name: "an unknown override key is named",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      echo: { renam: say }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.echo.renam", Msg: `did you mean "rename"`}},
		},
		{
			name: "prompts have no annotations",
			doc:  "mcpServers:\n  a:\n    command: x\n    prompts:\n      p: { annotations: { readOnlyHint: true } }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.prompts.p.annotations", Msg: "unknown key"}},
		},
		{
			name: "an unknown annotation is named",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      t: { annotations: { readOnly: true } }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.t.annotations.readOnly", Msg: "unknown key"}},
		},
		{
			name: "two renames onto one name collide",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      one: { rename: same }\n      two: { rename: same }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.two.rename", Msg: `"same" is also the name of "one"`}},
		},
		{
			name: "a rename onto a name another override keeps collides",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      say: { title: Say }\n      echo: { rename: say }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.say.rename", Msg: `"say" is also the name of "echo"`}},
		},
		{
			name: "a hidden item with other keys",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      t: { hide: true, rename: u }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.t.hide", Msg: "remove the other keys"}},
		},
		{
			name: "an empty rename",
			doc:  "mcpServers:\n  a:\n    command: x\n    tools:\n      t: { rename: '' }\n",
			want: []wantErr{{Source: "t.yaml", Key: "mcpServers.a.tools.t.rename", Msg: "must not be empty"}},
		},
		{
			name: "a toolset of an unknown server, a bad name, an unknown key and an empty pattern",
			doc:  "mcpServers:\n  a:\n    command: x\ntoolsets:\n  'd/x': { servers: [b], tool: [], prompts: ['!'] }\n",
			want: []wantErr{
				{Source: "t.yaml", Key: `toolsets."d/x"`, Msg: "URL path segment"},
				{Source: "t.yaml", Key: `toolsets."d/x".prompts[0]`, Msg: "empty pattern"},
				{Source: "t.yaml", Key: `toolsets."d/x".servers[0]`, Msg: `no server "b"`},
				{Source: "t.yaml", Key: `toolsets."d/x".tool`, Msg: `did you mean "tools"`},
			},
		},
		{
			name: "a misspelt toolsets section",
			doc:  "mcpServers:\n  a:\n    command: x\ntoolset: {}\n",
			want: []wantErr{{Source: "t.yaml", Key: "toolset", Msg: `did you mean "toolsets"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "yaml", "t.yaml", &LoadOptions{Environ: []string{}})
			checkErrors(t, err, tt.want)
		})
	}
}
