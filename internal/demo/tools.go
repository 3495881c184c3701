package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LongToolName is the 80-character tool name registered when
// [Options.LongNames] is set.
const LongToolName = "a_deliberately_long_tool_name_for_exercising_gateway_name_shortening_01234567890"

// MaxSlowMillis is the largest ms argument the slow tool accepts.
const MaxSlowMillis = 60000

// ErrDemoFailure is the error the fail tool reports (as a tool error, not a
// protocol error).
var ErrDemoFailure = errors.New("demo failure")

// MetaKey is the _meta key set on the annotated tool and on its results.
const MetaKey = "demo/meta"

type echoArgs struct {
	Message string `json:"message" jsonschema:"the text to echo back"`
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

type slowArgs struct {
	MS int `json:"ms"`
}

// InfoOutput is the structured content of the info tool.
type InfoOutput struct {
	Server string `json:"server" jsonschema:"the demo server name"`
	PID    int    `json:"pid" jsonschema:"the process id"`
	Cwd    string `json:"cwd" jsonschema:"the working directory"`
	Env    string `json:"env" jsonschema:"the value of DEMO_VALUE, or empty"`
}

// MetaOutput is the structured content of the meta tool: what reached the
// server of the request's trace context, for propagation tests.
type MetaOutput struct {
	Meta    map[string]any    `json:"meta" jsonschema:"the request's params._meta ({} when absent)"`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"the traceparent, tracestate and baggage headers of the HTTP request, when present"`
}

// traceHeaders are the W3C headers the meta tool reports.
var traceHeaders = []string{"traceparent", "tracestate", "baggage"}

// noArgs is the input of tools that take no arguments.
type noArgs struct{}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func addTools(s *mcp.Server, name string, opts *Options) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Title:       "Echo",
		Description: "Returns the message unchanged as text.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return textResult(in.Message), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "add",
		Title:       "Add",
		Description: "Adds two numbers; the sum is returned as structured content and as text.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, addOut, error) {
		sum := in.A + in.B
		return textResult(strconv.FormatFloat(sum, 'g', -1, 64)), addOut{Sum: sum}, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "image",
		Title:       "Image",
		Description: "Returns a tiny PNG image.",
	}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: pngBytes(), MIMEType: "image/png"},
		}}, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "fail",
		Title:       "Fail",
		Description: `Always fails with a tool error (isError true, text "demo failure").`,
	}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return nil, nil, ErrDemoFailure
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "slow",
		Title:       "Slow",
		Description: `Sleeps for ms milliseconds (at most 60000), then returns "done". Honors cancellation.`,
		InputSchema: map[string]any{
			"type":     "object",
			"required": []string{"ms"},
			"properties": map[string]any{
				"ms": map[string]any{
					"type":        "integer",
					"minimum":     0,
					"maximum":     MaxSlowMillis,
					"description": "how long to sleep, in milliseconds",
				},
			},
			"additionalProperties": false,
		},
	}, slow)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "info",
		Title:       "Info",
		Description: "Reports the server name, process id, working directory and $DEMO_VALUE.",
	}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, InfoOutput, error) {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, InfoOutput{}, fmt.Errorf("getting working directory: %w", err)
		}
		return nil, InfoOutput{Server: name, PID: os.Getpid(), Cwd: cwd, Env: os.Getenv("DEMO_VALUE")}, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "link",
		Title:       "Link",
		Description: "Returns a resource link to the readme and an embedded item resource.",
	}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ResourceLink{
				URI:      readmeURI(name),
				Name:     "readme",
				Title:    "Readme of " + name,
				MIMEType: "text/markdown",
			},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI:      itemURI(name, "7"),
				MIMEType: "text/plain",
				Text:     itemText(name, "7"),
			}},
		}}, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "annotated",
		Title:       "Annotated",
		Description: "A read-only tool with annotations, icons and _meta; its result carries _meta too.",
		Annotations: &mcp.ToolAnnotations{
			Title:          "Annotated (annotation title)",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  new(false),
		},
		Icons: []mcp.Icon{{Source: pngDataURI(), MIMEType: "image/png", Sizes: []string{"1x1"}}},
		Meta:  mcp.Meta{MetaKey: "x"},
	}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		res := textResult("annotated result from " + name)
		res.Meta = mcp.Meta{MetaKey: "x"}
		return res, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "meta",
		Title:       "Meta",
		Description: "Returns the request's params._meta, and its traceparent, tracestate and baggage HTTP headers when it came over HTTP.",
	}, func(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, MetaOutput, error) {
		out := MetaOutput{Meta: req.Params.Meta}
		if out.Meta == nil {
			out.Meta = map[string]any{}
		}
		if req.Extra != nil {
			for _, h := range traceHeaders {
				if v := req.Extra.Header.Get(h); v != "" {
					if out.Headers == nil {
						out.Headers = map[string]string{}
					}
					out.Headers[h] = v
				}
			}
		}
		return nil, out, nil
	})

	if opts.LongNames {
		addNameTool(s, LongToolName)
	}
	for _, n := range opts.ExtraTools {
		if n != "" {
			addNameTool(s, n)
		}
	}
}

func slow(ctx context.Context, _ *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
	ms := min(max(in.MS, 0), MaxSlowMillis) // the schema already enforces this
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-t.C:
		return textResult("done"), nil, nil
	}
}

// addNameTool adds a trivial tool that returns its own name as text.
func addNameTool(s *mcp.Server, toolName string) {
	s.AddTool(&mcp.Tool{
		Name:        toolName,
		Title:       "Extra tool " + toolName,
		Description: "Returns its own name (" + toolName + ") as text.",
		InputSchema: map[string]any{"type": "object"},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult(toolName), nil
	})
}
