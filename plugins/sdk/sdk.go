// Package sdk is the Go SDK for Manifold hook plugins: fill in the hooks
// you implement in a Plugin and call Serve from main. The gateway starts the
// binary through hashicorp/go-plugin (gRPC, mutual TLS) and calls the hooks
// on the calls and lists the plugin's `match:` selects (docs/architecture.md,
// Plugins). A hook sees raw JSON: the arguments or params before the call,
// the result after it, the items of a list.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"google.golang.org/grpc"
)

// ProtocolVersion is the version of the plugin protocol (plugins/proto,
// package manifold.plugin.v1) this SDK speaks.
const ProtocolVersion = 1

// PluginName is the name the gateway dispenses.
const PluginName = "hook"

// MaxMessageEnv is the environment variable in which the gateway sends its
// gateway.limits.maxMessageBytes before the plugin starts serving: both
// sides size their gRPC message limits from it.
const MaxMessageEnv = "MANIFOLD_PLUGIN_MAX_MESSAGE_BYTES"

// DefaultMaxMessageBytes is the message limit without MaxMessageEnv.
const DefaultMaxMessageBytes = 4 << 20

// Handshake is the go-plugin handshake of Manifold hook plugins.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "MANIFOLD_PLUGIN",
	MagicCookieValue: "hook",
}

// The hook names, as the manifest and the gateway's metrics name them.
const (
	ToolPreCall      = "tool_pre_call"
	ToolPostCall     = "tool_post_call"
	PromptPreGet     = "prompt_pre_get"
	PromptPostGet    = "prompt_post_get"
	ResourcePreRead  = "resource_pre_read"
	ResourcePostRead = "resource_post_read"
	ListPost         = "list_post"
	AuditEvent       = "audit_event"
)

// Context is what a hook knows of the call or list: who, which session,
// which server and name.
type Context struct {
	Principal string
	Groups    []string
	SessionID string
	// Server is the upstream server's name.
	Server string
	// Name is the tool or prompt name or resource URI as the client knows
	// it; UpstreamName as the upstream knows it.
	Name, UpstreamName string
	// Traceparent is the W3C trace context of the call, when traced.
	Traceparent string
	// List is what a list_post hook lists: tools, prompts, resources or
	// templates.
	List string
}

// Action is what a hook decides.
type Action int

// The actions; see proto.HookResponse_Action.
const (
	Continue Action = Action(proto.HookResponse_CONTINUE)
	Modify   Action = Action(proto.HookResponse_MODIFY)
	Block    Action = Action(proto.HookResponse_BLOCK)
	Respond  Action = Action(proto.HookResponse_RESPOND)
)

// Result is a hook's decision. The zero value continues.
type Result struct {
	Action Action
	// Payload is the modified arguments or result (Modify), or the
	// synthetic result (Respond).
	Payload json.RawMessage
	// Reason is what the client sees of a Block.
	Reason string
	// Rule names what decided, and Counts what was found by kind (never
	// the values), for the audit record.
	Rule   string
	Counts map[string]int64
}

// Hook is a pre or post hook: payload is the arguments (tool_pre_call,
// prompt_pre_get), the params (resource_pre_read) or the result (post
// hooks).
type Hook func(ctx context.Context, c *Context, payload json.RawMessage) (Result, error)

// Item is one entry of a list: a tool, prompt, resource or template.
type Item struct {
	// Name and Description are the entry's; changing them renames the
	// entry (tools and prompts only) or rewrites its description.
	Name, Description string
	// Raw is the entry's definition as listed.
	Raw json.RawMessage

	from string // the name the gateway listed it under
}

// Plugin is a plugin's hooks: nil ones are not implemented (and not
// called). Its functions may be called concurrently.
type Plugin struct {
	// Configure receives the plugin's `config:` (a JSON object, or nil) at
	// start and on each reload that changes it; an error refuses the
	// config (the gateway keeps the plugin's previous one).
	Configure func(ctx context.Context, config json.RawMessage) error

	ToolPreCall, ToolPostCall         Hook
	PromptPreGet, PromptPostGet       Hook
	ResourcePreRead, ResourcePostRead Hook
	// ListPost filters, renames or rewrites the items of one list for one
	// principal; the gateway caches its answer until the catalog changes.
	ListPost func(ctx context.Context, c *Context, items []Item) ([]Item, error)
	// AuditEvent receives each audit record (JSON), asynchronously.
	AuditEvent func(ctx context.Context, record json.RawMessage)
}

// hooks returns the manifest of p: the hooks it implements.
func (p *Plugin) hooks() []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(p.ToolPreCall != nil, ToolPreCall)
	add(p.ToolPostCall != nil, ToolPostCall)
	add(p.PromptPreGet != nil, PromptPreGet)
	add(p.PromptPostGet != nil, PromptPostGet)
	add(p.ResourcePreRead != nil, ResourcePreRead)
	add(p.ResourcePostRead != nil, ResourcePostRead)
	add(p.ListPost != nil, ListPost)
	add(p.AuditEvent != nil, AuditEvent)
	return out
}

// MaxMessageBytes returns the message limit the gateway sent in
// MaxMessageEnv, or DefaultMaxMessageBytes.
func MaxMessageBytes() int {
	if n, err := strconv.Atoi(os.Getenv(MaxMessageEnv)); err == nil && n > 0 {
		return n + 64<<10 // room for the request's other fields
	}
	return DefaultMaxMessageBytes
}

// Serve serves p to the gateway that started this process, until the
// gateway stops it. It must be called from main and does not return while
// served. Run by hand (not by the gateway), it prints a notice and exits.
func Serve(p *Plugin) {
	limit := MaxMessageBytes()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {PluginName: &GRPCPlugin{Impl: p}},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(limit), grpc.MaxSendMsgSize(limit))...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info}),
	})
}

// GRPCPlugin is the go-plugin glue of the hook service: the server side
// serves Impl; the client side (the gateway's) returns a
// proto.PluginClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl *Plugin
}

// GRPCServer registers Impl's service.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if g.Impl == nil {
		return errors.New("sdk: no plugin to serve")
	}
	proto.RegisterPluginServer(s, &server{p: g.Impl})
	return nil
}

// GRPCClient returns the client of the hook service on conn.
func (g *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return proto.NewPluginClient(conn), nil
}

// server adapts a Plugin to the generated service.
type server struct {
	proto.UnimplementedPluginServer
	p *Plugin
}

func (s *server) Configure(ctx context.Context, req *proto.ConfigureRequest) (*proto.ConfigureResponse, error) {
	if s.p.Configure != nil {
		if err := s.p.Configure(ctx, req.GetConfig()); err != nil {
			return nil, err
		}
	}
	return &proto.ConfigureResponse{Hooks: s.p.hooks()}, nil
}

func (s *server) Hook(ctx context.Context, req *proto.HookRequest) (*proto.HookResponse, error) {
	c := fromProto(req.GetContext())
	var h Hook
	switch req.GetHook() {
	case ToolPreCall:
		h = s.p.ToolPreCall
	case ToolPostCall:
		h = s.p.ToolPostCall
	case PromptPreGet:
		h = s.p.PromptPreGet
	case PromptPostGet:
		h = s.p.PromptPostGet
	case ResourcePreRead:
		h = s.p.ResourcePreRead
	case ResourcePostRead:
		h = s.p.ResourcePostRead
	case ListPost:
		if s.p.ListPost != nil {
			return s.listPost(ctx, c, req.GetPayload())
		}
	case AuditEvent:
		if s.p.AuditEvent != nil {
			s.p.AuditEvent(ctx, req.GetPayload())
			return &proto.HookResponse{}, nil
		}
	}
	if h == nil {
		return nil, fmt.Errorf("hook %q not implemented", req.GetHook())
	}
	r, err := h(ctx, c, req.GetPayload())
	if err != nil {
		return nil, err
	}
	return &proto.HookResponse{
		Action: proto.HookResponse_Action(r.Action), Payload: r.Payload,
		Reason: r.Reason, Rule: r.Rule, Counts: r.Counts,
	}, nil
}

// listPost decodes the items, runs ListPost and encodes its answer with
// the renames it made.
func (s *server) listPost(ctx context.Context, c *Context, payload []byte) (*proto.HookResponse, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(payload, &raws); err != nil {
		return nil, fmt.Errorf("list_post: items: %w", err)
	}
	items := make([]Item, len(raws))
	for i, raw := range raws {
		var head struct{ Name, Description string }
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("list_post: item %d: %w", i, err)
		}
		items[i] = Item{Name: head.Name, Description: head.Description, Raw: raw, from: head.Name}
	}
	out, err := s.p.ListPost(ctx, c, items)
	if err != nil {
		return nil, err
	}
	renames := map[string]string{}
	encoded := make([]json.RawMessage, 0, len(out))
	for _, it := range out {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(it.Raw, &m); err != nil {
			return nil, fmt.Errorf("list_post: item %q: %w", it.Name, err)
		}
		if it.from != "" && it.Name != it.from {
			renames[it.Name] = it.from
		}
		m["name"], _ = json.Marshal(it.Name)
		if it.Description != "" {
			m["description"], _ = json.Marshal(it.Description)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		encoded = append(encoded, b)
	}
	b, err := json.Marshal(encoded)
	if err != nil {
		return nil, err
	}
	return &proto.HookResponse{Action: proto.HookResponse_MODIFY, Payload: b, Renames: renames}, nil
}

func fromProto(c *proto.Context) *Context {
	if c == nil {
		return &Context{}
	}
	return &Context{
		Principal: c.GetPrincipal(), Groups: c.GetGroups(), SessionID: c.GetSessionId(),
		Server: c.GetServer(), Name: c.GetName(), UpstreamName: c.GetUpstreamName(),
		Traceparent: c.GetTraceparent(), List: c.GetList(),
	}
}
