package plugins

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
)

// answerRPC answers every hook with res.
type answerRPC struct{ res *proto.HookResponse }

func (f *answerRPC) Configure(context.Context, *proto.ConfigureRequest, ...grpc.CallOption) (*proto.ConfigureResponse, error) {
	return &proto.ConfigureResponse{}, nil
}

func (f *answerRPC) Hook(context.Context, *proto.HookRequest, ...grpc.CallOption) (*proto.HookResponse, error) {
	return f.res, nil
}

// TestUnusableAnswers: a plugin's answer the gateway cannot use (a MODIFY or RESPOND payload
// that is not JSON, an unknown action) is the plugin failing: under onError fail-closed the
// call stops as unavailable, under fail-open it goes on unchanged, with the decision recorded
// as an error either way. Before, an unusable RESPOND and an unknown action let the call
// through under fail-closed.
func TestUnusableAnswers(t *testing.T) {
	for name, res := range map[string]*proto.HookResponse{
		"modify, invalid JSON":  {Action: proto.HookResponse_MODIFY, Payload: []byte(`{`)},
		"respond, invalid JSON": {Action: proto.HookResponse_RESPOND, Payload: []byte(`{`)},
		"unknown action":        {Action: proto.HookResponse_Action(42)},
	} {
		for _, onError := range []string{config.PluginFailClosed, config.PluginFailOpen} {
			t.Run(name+"/"+onError, func(t *testing.T) {
				h := New(&Options{Logger: zaptest.NewLogger(t)})
				t.Cleanup(func() { _ = h.Close(context.Background()) })
				cfg := config.Plugin{Name: "p", Mode: config.PluginEnforce, OnError: onError, Timeout: time.Second}
				in := newInstance(&cfg, &spec{}, 1<<20, zap.NewNop(), nil)
				c := &conn{rpc: &answerRPC{res: res}}
				c.hooks.Store(uint32(hookSet(1 << ToolPreCall)))
				in.cur.Store(c)
				chain := newChain([]config.Plugin{cfg}, map[string]*instance{"p": in}, h)
				out, err := chain.Pre(context.Background(), toolTarget, []byte(`{"a":1}`))
				var blocked *BlockedError
				if closed := onError == config.PluginFailClosed; closed != (errors.As(err, &blocked) && blocked.Unavailable) {
					t.Fatalf("Pre = %+v, %v; want stopped as unavailable: %v", out, err, closed)
				}
				if len(out.Decisions) != 1 || out.Decisions[0].Action != "error" {
					t.Errorf("decisions %+v, want one error", out.Decisions)
				}
				if err == nil && (out.Changed || out.Respond || string(out.Payload) != `{"a":1}`) {
					t.Errorf("fail-open went on with %+v, want the call unchanged", out)
				}
			})
		}
	}
}
