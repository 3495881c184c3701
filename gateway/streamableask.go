package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server→client requests of a raw call on a streamable session
// (docs/architecture.md, Two paths): the SDK session cannot write on a
// raw call's response (its transport routes a request by the id of an SDK
// request in flight), so the gateway sends sampling and roots requests
// itself, as events of the call's response (callResponse.ask), under ids
// of its own ("manifold-ask-N", per session), and the front diverts the
// client's answer, a POST of a JSON-RPC response with such an id, to the
// waiting relay (sessionIDs.answer). Elicitation, whose answers the SDK
// checks against the requested schema, stays with the SDK path: a session
// whose client declared it is not served raw (httpTakes).

// askPrefix starts the ids of the gateway's requests on a raw call's
// response.
const askPrefix = "manifold-ask-"

// ask sends a request of method with params to the client, as an event of
// the call's response, and decodes the client's result into result. A
// JSON-RPC error of the client's is returned as such. When ctx ends first,
// the client is told (notifications/cancelled) and ctx's error returned.
func (c *callResponse) ask(ctx context.Context, method string, params, result any) error {
	if c.ids == nil {
		return fmt.Errorf("%s: %w", method, errAnswered)
	}
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	id, answer := c.ids.await()
	defer c.ids.drop(id)
	msg := make([]byte, 0, len(id)+len(method)+len(p)+48)
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = envelope.AppendString(msg, id)
	msg = append(msg, `,"method":`...)
	msg = envelope.AppendString(msg, method)
	msg = append(msg, `,"params":`...)
	msg = append(append(msg, p...), '}')
	if !c.event(msg) {
		return fmt.Errorf("%s: %w", method, errAnswered)
	}
	var resp []byte
	select {
	case resp = <-answer:
	case <-ctx.Done():
		cancel := append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), envelope.AppendString(nil, id)...), `}}`...)
		c.event(cancel)
		return ctx.Err()
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("the client's answer to %s: %w", method, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("the client's result of %s: %w", method, err)
	}
	return nil
}

// createMessage asks the client of c for sampling, as the SDK session's
// CreateMessageWithTools sends it.
func (c *callResponse) createMessage(ctx context.Context, p *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error) {
	if p == nil {
		p = &mcpx.CreateMessageWithToolsParams{}
	}
	if p.Messages == nil {
		p2 := *p
		p2.Messages = []*mcpx.SamplingMessageV2{} // not null, as the SDK sends it
		p = &p2
	}
	var res mcpx.CreateMessageWithToolsResult
	if err := c.ask(ctx, "sampling/createMessage", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// listRoots asks the client of c for its roots.
func (c *callResponse) listRoots(ctx context.Context, p *mcpx.ListRootsParams) (*mcpx.ListRootsResult, error) {
	var res mcpx.ListRootsResult
	if err := c.ask(ctx, "roots/list", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// askInput is askClient for a raw call answered on c.
func (c *callResponse) askInput(ctx context.Context, ir mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := ir.(type) {
	case *mcpx.CreateMessageWithToolsParams:
		return answer(c.createMessage(ctx, p))
	case *mcpx.CreateMessageParams:
		return answer(c.createMessage(ctx, withTools(p)))
	case *mcpx.ListRootsParams:
		return answer(c.listRoots(ctx, p))
	}
	// Elicitation: sessions that declared it take the SDK path.
	return nil, fmt.Errorf("%s cannot be sent on a raw call's response", inputMethod(ir))
}

// await makes an id for a request to the session's client and returns it
// with the channel its answer will come on.
func (s *sessionIDs) await() (string, <-chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	id := askPrefix + strconv.FormatUint(s.asked, 10)
	ch := make(chan []byte, 1)
	if s.asks == nil {
		s.asks = map[string]chan []byte{}
	}
	s.asks[id] = ch
	return id, ch
}

// drop forgets the request id.
func (s *sessionIDs) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.asks, id)
}

// answer hands msg, a response of the client whose id (JSON) is one of
// the gateway's requests on a raw call, to the relay waiting for it, and
// reports whether there was one.
func (s *sessionIDs) answer(id, msg []byte) bool {
	if len(id) == 0 || id[0] != '"' {
		return false
	}
	s.mu.Lock()
	ch, ok := s.asks[string(envelope.Text(id))]
	if ok {
		delete(s.asks, string(envelope.Text(id)))
	}
	s.mu.Unlock()
	if ok {
		ch <- msg // buffered, and sent once
	}
	return ok
}
