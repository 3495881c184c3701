package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Multi round-trip requests (MRTR) across protocol versions.
//
// tools/call, prompts/get and resources/read may take several rounds when
// a server needs input from the client. How the gateway carries them
// depends on both ends (forward):
//
//	client      upstream    rounds
//	2026-07-28  2026-07-28  the upstream's input_required results and
//	                        requestState pass through untouched
//	2026-07-28  older       the bridge turns the upstream's requests into
//	                        input_required results (bridge.go)
//	older       2026-07-28  the handler asks the client with real requests
//	                        and retries the upstream itself, for up to
//	                        maxMRTRRounds upstream requests (fulfilRounds)
//	older       older       server requests are relayed (relay.go)
//
// The SDK's own server-side fallback for older clients fulfils one round
// only; fulfilRounds never hands it an input_required result.

// maxMRTRRounds bounds the upstream requests of one call of an older client
// to a 2026-07-28 upstream that keeps asking for input (the go-sdk client
// allows as many).
const maxMRTRRounds = 10

// forward is the forward stage of the call pipeline (pipeline.go): it
// serves req, routed to rt and decided under snap, by the protocol versions
// of the client and the upstream (see the table above), each upstream
// request a roundTrip, then puts an error the client's version does not
// know into one it does (translateError).
func forward[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, rt route, snap *snapshot) (R, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	version := protocolVersion(req, ss)
	_, state := m.input(req)
	upVersion := upstreamVersion(rt.up)
	var res R
	var err error
	switch {
	case isBridgeState(state):
		res, err = bridgeResume(ctx, g, m, req, snap)
	case mcpx.Stateless(version) && !mcpx.Stateless(upVersion):
		res, err = bridgeStart(ctx, g, m, req, rt, snap)
	case !mcpx.Stateless(version) && mcpx.Stateless(upVersion):
		res, err = fulfilRounds(ctx, g, m, req, rt, snap, ss)
	default:
		res, err = roundTrip(ctx, g, m, req, rt, snap)
	}
	if err != nil {
		return translateError(g, m, ss, version, rt.up, res, err)
	}
	return res, nil
}

// upstreamVersion is the protocol version up negotiated; "" before it
// connected.
func upstreamVersion(up *upstream.Upstream) string {
	if cat := up.Catalog(); cat != nil {
		return cat.ProtocolVersion
	}
	return ""
}

// fulfilRounds serves req of a client older than 2026-07-28 on a
// 2026-07-28 upstream: while the upstream answers input_required, it asks
// the client for each input with a real request (on the stream of ctx,
// the handler's), and retries with the answers and the upstream's
// requestState. A client's refusal (decline, cancel) is an answer and goes
// to the upstream as such; a client's error ends the call with it, since
// MRTR has no way to carry an error upstream.
func fulfilRounds[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, rt route, snap *snapshot, ss *mcp.ServerSession) (R, error) {
	var zero R
	for round := 1; ; round++ {
		g.exchange(ctx).setRounds(round)
		res, err := roundTrip(ctx, g, m, req, rt, snap)
		if err != nil {
			return res, err
		}
		irs, state, more := m.asks(res)
		if !more {
			return res, nil
		}
		if round >= maxMRTRRounds {
			return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"manifold: upstream %q still asks for input after %d rounds", rt.up.Name(), round)}
		}
		if ss == nil {
			return zero, &jsonrpc.Error{Code: codeUnroutable, Message: "manifold: the upstream asks for input, and this client has no session to ask"}
		}
		answers, err := fulfil(ctx, ss, nil, req.ClientCapabilities(), irs)
		if err != nil {
			return zero, err
		}
		req = m.retry(req, answers, state)
	}
}

// fulfil asks the client of ss, in parallel, for each input request of
// irs, after checking that its capabilities cover them all; on the
// response of a raw call (sink) when not nil, else through ss.
func fulfil(ctx context.Context, ss *mcp.ServerSession, sink *callResponse, caps *mcp.ClientCapabilities, irs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	for _, ir := range irs {
		if !inputCapable(caps, ir) {
			return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: fmt.Sprintf(
				"manifold: the upstream asks for %s, which this client does not support", inputMethod(ir))}
		}
	}
	ctx, cancel := context.WithCancel(ctx) // keeps the handler's stream
	defer cancel()
	answers := make(mcp.InputResponseMap, len(irs))
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for id, ir := range irs {
		wg.Go(func() {
			var a mcp.InputResponse
			var err error
			if sink != nil {
				a, err = sink.askInput(ctx, ir)
			} else {
				a, err = askClient(ctx, ss, ir)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = clientError(ir, err)
					cancel()
				}
				return
			}
			answers[id] = a
		})
	}
	wg.Wait()
	return answers, first
}

// askClient sends input request ir to the client of ss as a real request.
// A panic (the SDK has no recover) becomes an error.
func askClient(ctx context.Context, ss *mcp.ServerSession, ir mcp.InputRequest) (a mcp.InputResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		return answer(ss.Elicit(ctx, p))
	case *mcpx.CreateMessageWithToolsParams:
		return answer(mcpx.CreateMessageWithTools(ctx, ss, p))
	case *mcpx.CreateMessageParams:
		return answer(mcpx.CreateMessageWithTools(ctx, ss, withTools(p)))
	case *mcpx.ListRootsParams:
		return answer(mcpx.ListRoots(ctx, ss, p))
	}
	return nil, fmt.Errorf("unknown input request %T", ir)
}

// answer is r as an input response, or err (never a typed nil).
func answer[T mcp.InputResponse](r T, err error) (mcp.InputResponse, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// clientError is the error the client gets when it failed to answer ir:
// its own JSON-RPC error as it was, or an internal error naming the input.
func clientError(ir mcp.InputRequest, err error) error {
	if rpcErr, ok := mcpx.AsRPCError(err); ok {
		return rpcErr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("manifold: asking the client for %s: %v", inputMethod(ir), err)}
}

// withTools is p in the form the SDK's ServerSession sends.
func withTools(p *mcpx.CreateMessageParams) *mcpx.CreateMessageWithToolsParams {
	msgs := make([]*mcpx.SamplingMessageV2, 0, len(p.Messages))
	for _, m := range p.Messages {
		msgs = append(msgs, &mcpx.SamplingMessageV2{Content: []mcp.Content{m.Content}, Role: m.Role})
	}
	return &mcpx.CreateMessageWithToolsParams{
		Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens, Messages: msgs,
		Metadata: p.Metadata, ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences,
		SystemPrompt: p.SystemPrompt, Temperature: p.Temperature,
	}
}

// inputMethod is the method of an input request.
func inputMethod(ir mcp.InputRequest) string {
	switch ir.(type) {
	case *mcp.ElicitParams:
		return "elicitation/create"
	case *mcpx.CreateMessageParams, *mcpx.CreateMessageWithToolsParams:
		return "sampling/createMessage"
	case *mcpx.ListRootsParams:
		return "roots/list"
	}
	return fmt.Sprintf("%T", ir)
}

// inputCapable reports whether a client with capabilities c can answer ir,
// by the rules relay.go applies to server requests.
func inputCapable(c *mcp.ClientCapabilities, ir mcp.InputRequest) bool {
	if c == nil {
		return false
	}
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		return elicitable(c.Elicitation, p)
	case *mcpx.CreateMessageWithToolsParams:
		return mcpx.Sampling(c) != nil && (len(p.Tools) == 0 || mcpx.Sampling(c).Tools != nil)
	case *mcpx.CreateMessageParams:
		return mcpx.Sampling(c) != nil
	case *mcpx.ListRootsParams:
		return mcpx.RootsV2(c) != nil || mcpx.RootsListChanged(c)
	}
	return false
}

// elicitable reports whether a client with elicitation capabilities e
// supports the mode of p: the spec forbids sending a mode the client did
// not declare. An elicitation in URL mode (or, without a mode, with a URL)
// needs "url"; one in form mode needs "form", which an empty capability
// ({}, as clients before URL mode declared it) also means.
func elicitable(e *mcp.ElicitationCapabilities, p *mcp.ElicitParams) bool {
	if e == nil {
		return false
	}
	if p.Mode == "url" || p.Mode == "" && p.URL != "" {
		return e.URL != nil
	}
	return e.Form != nil || e.URL == nil
}

// setRounds notes the MRTR round a request is (1 for the first), for its
// audit record.
func (x *exchange) setRounds(n int) {
	if x != nil {
		x.rounds = n
	}
}

// bridgedRound notes that the request is round n of a bridged call begun
// at start: its audit record, if it ends the call, spans the whole call.
func (x *exchange) bridgedRound(n int, start time.Time) {
	if x != nil {
		x.rounds, x.callStart = n, start
	}
}

// markInterim notes that the request answered input_required for a
// bridged call: a later round writes the call's audit record.
func (x *exchange) markInterim() {
	if x != nil {
		x.interim = true
	}
}
