package demo

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Completion candidates, matched by prefix.
var (
	personCandidates = []string{"alice", "bob", "carol"}
	itemIDCandidates = []string{"1", "2", "7", "42"}
)

func addPrompts(s *mcp.Server, name string) {
	s.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Title:       "Greet",
		Description: "Asks the model to greet a person.",
		Arguments: []*mcp.PromptArgument{{
			Name:        "person",
			Title:       "Person",
			Description: "who to greet",
			Required:    true,
		}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		person := req.Params.Arguments["person"]
		if person == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `prompt "greet": missing required argument "person"`}
		}
		return &mcp.GetPromptResult{
			Description: "Greet " + person,
			Messages: []*mcp.PromptMessage{{
				Role:    "user",
				Content: &mcp.TextContent{Text: "Say hello to " + person + " from " + name + "."},
			}},
		}, nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "summarize",
		Title:       "Summarize",
		Description: "Asks the model to summarize the readme, optionally focusing on a topic.",
		Arguments: []*mcp.PromptArgument{{
			Name:        "topic",
			Title:       "Topic",
			Description: "what to focus on (optional)",
		}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		text := "Summarize the readme of demo server " + name + "."
		if topic := req.Params.Arguments["topic"]; topic != "" {
			text = "Summarize the readme of demo server " + name + ", focusing on " + topic + "."
		}
		return &mcp.GetPromptResult{
			Description: "Summarize the readme of " + name,
			Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: text}},
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI:      readmeURI(name),
					MIMEType: "text/markdown",
					Text:     readmeText(name),
				}}},
			},
		}, nil
	})
}

// completionHandler completes the greet prompt's person argument and the
// item template's id argument by prefix. Unknown references and arguments
// complete to no values rather than an error.
func completionHandler(name string) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		p := req.Params
		var candidates []string
		switch {
		case p.Ref == nil: // only possible with MCPGODEBUG=disablecompleteparamsvalidation=1
		case p.Ref.Type == "ref/prompt" && p.Ref.Name == "greet" && p.Argument.Name == "person":
			candidates = personCandidates
		case p.Ref.Type == "ref/resource" && p.Ref.URI == itemsTemplate(name) && p.Argument.Name == "id":
			candidates = itemIDCandidates
		}
		values := []string{} // "values" is required: never marshal null
		for _, c := range candidates {
			if strings.HasPrefix(c, p.Argument.Value) {
				values = append(values, c)
			}
		}
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
			Values: values,
			Total:  len(values),
		}}, nil
	}
}
