package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The policy bypass tests: every attempt to reach a denied name or URI by
// writing it differently fails, and the upstream hears nothing of the
// denied items.

// lockdown denies the local principal alpha's echo, its long-named tool,
// its readme and its items, and allows everything else.
func lockdown(longName string) func(*config.Config) {
	return func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{
				Tools:     []string{"alpha__echo", longName},
				Resources: []string{"manifold://alpha/demo://alpha/readme", "manifold://alpha/demo://alpha/items/*"},
				Templates: []string{"manifold://alpha/demo://alpha/items/{id}"},
			}},
		}}
	}
}

func TestPolicyBypassAttemptsFail(t *testing.T) {
	long := namespacing.Name("alpha", demo.LongToolName, namespacing.Options{})
	if len(long) != 64 {
		t.Fatalf("the long tool's exposed name %q is not shortened", long)
	}
	h := newHarnessWith(t, lockdown(long),
		upstreamSpec{name: "alpha", demoName: "alpha", opts: &demo.Options{LongNames: true}},
		upstreamSpec{name: "beta", demoName: "beta"})
	ctx := context.Background()
	up := h.ups["alpha"]

	// The denied items are hidden from lists.
	for _, name := range toolNames(t, h.client) {
		if name == "alpha__echo" || name == long {
			t.Errorf("tools/list shows the denied %s", name)
		}
	}
	lr, err := h.client.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range lr.Resources {
		if strings.HasPrefix(r.URI, "manifold://alpha/demo://alpha/readme") {
			t.Errorf("resources/list shows the denied %s", r.URI)
		}
	}

	flipped := []byte(long)
	if flipped[len(flipped)-1] == '0' {
		flipped[len(flipped)-1] = '1'
	} else {
		flipped[len(flipped)-1] = '0'
	}
	tools := []string{
		"alpha__echo",                 // the name itself
		"ALPHA__echo",                 // case variants
		"alpha__Echo",                 //
		"Alpha__ECHO",                 //
		"alpha__\u0435cho",            // Cyrillic е
		"alpha__ｅcho",                 // fullwidth e
		"alpha__echo\u200b",           // zero-width space
		"alpha__e\u0301cho",           // combining accent
		"alpha____echo",               // doubled separator
		"alpha___echo",                //
		"alpha__echo__",               // trailing separator
		"__alpha__echo",               // leading separator
		"alpha__ echo",                // spaces
		" alpha__echo",                //
		"alpha__echo ",                //
		"alpha__echo\x00",             // NUL
		"alpha/echo",                  // another separator
		"alpha.echo",                  //
		"echo",                        // the upstream's raw name
		"alpha__" + "echo\n",          // newline
		long,                          // the shortened name, denied
		string(flipped),               // its hash variant
		"alpha__" + demo.LongToolName, // the long name unshortened
		long[:len(long)-1],            // truncated
	}
	before := up.calls.Load()
	for _, name := range tools {
		res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "leak"}})
		if err == nil {
			t.Errorf("tools/call %q succeeded: %+v", name, res)
		}
	}
	resources := []string{
		"manifold://alpha/demo://alpha/readme",
		"manifold://alpha/demo://alpha/./readme",
		"manifold://alpha/demo://alpha/x/../readme",
		"manifold://alpha/demo://alpha/readme/.",
		"manifold://alpha/demo://alpha/%72eadme",
		"manifold://alpha/demo://alpha/%2E/readme",
		"manifold://alpha/demo:%2F%2Falpha%2Freadme",
		"manifold://alpha/demo://alpha/items/7",
		"manifold://alpha/demo://alpha/items/%37",
		"manifold://alpha/demo://alpha/items/../readme",
		"manifold://alpha/demo://alpha\\items\\7",
	}
	for _, uri := range resources {
		if res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("resources/read %q succeeded: %+v", uri, res)
		}
	}
	// Subscriptions: denied, missing and allowed URIs all get the same answer.
	legacy := h.connectVersion(t, "2025-11-25")
	subCodes := map[int64][]string{}
	for _, uri := range []string{"manifold://alpha/demo://alpha/readme", "manifold://alpha/demo://alpha/./readme",
		"MANIFOLD://alpha/demo://alpha/readme", "manifold://alpha/demo://alpha/nothing", "manifold://alpha/demo://alpha/logo"} {
		err := legacy.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		subCodes[rpcCode(err)] = append(subCodes[rpcCode(err)], uri)
	}
	if len(subCodes) != 1 {
		t.Errorf("resources/subscribe answers differ by URI: %v", subCodes)
	}
	for _, uri := range []string{"manifold://alpha/demo://alpha/items/{id}", "MANIFOLD://alpha/demo://alpha/items/{id}",
		"manifold://alpha/demo://alpha/items/{id}?x", "manifold://alpha/demo://alpha//items/{id}"} {
		if _, err := h.client.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri},
			Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}}); err == nil {
			t.Errorf("completion on the denied template %q succeeded", uri)
		}
	}
	if _, err := h.client.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "manifold://beta/demo://beta/items/{id}"},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}}); err != nil {
		t.Errorf("completion on beta's template (not denied): %v", err)
	}
	if n := up.calls.Load() - before; n != 0 {
		t.Errorf("alpha received %d requests for denied items", n)
	}

	// A denied URI cannot be told from one the upstream does not have.
	_, denied := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/items/7"})
	_, missing := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/nothing"})
	_, unrouted := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://nobody/x"})
	for _, err := range []error{missing, unrouted} {
		if rpcCode(err) != rpcCode(denied) || !strings.Contains(err.Error(), "Resource not found") || !strings.Contains(denied.Error(), "Resource not found") {
			t.Errorf("denied read %v differs from not-found read %v", denied, err)
		}
	}

	// URIs that route elsewhere reach another server, or none, never the
	// denied item.
	for _, uri := range []string{
		"MANIFOLD://alpha/demo://alpha/readme",
		"manifold://ALPHA/demo://alpha/readme",
		"manifold://beta/demo://alpha/readme", // another server's prefix
		"manifold://alpha//demo://alpha/readme",
		"demo://alpha/readme", // the upstream's raw URI
	} {
		res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil && strings.Contains(textOfResource(res), "Demo server alpha") {
			t.Errorf("resources/read %q returned alpha's readme", uri)
		}
	}
	// Allowed neighbours still work, so the denials above are the policy's.
	if _, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"message": "ok"}}); err != nil {
		t.Errorf("beta__echo: %v", err)
	}
	if _, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/logo"}); err != nil {
		t.Errorf("alpha's logo: %v", err)
	}
}

func textOfResource(res *mcp.ReadResourceResult) string {
	var b strings.Builder
	for _, c := range res.Contents {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestPolicyWireGames sends raw JSON-RPC as bob (who may call only echo and
// link): batches, duplicate and odd ids, calls before initialize, and
// misspelt methods never run a denied tool.
func TestPolicyWireGames(t *testing.T) {
	_, srv, up := teamGateway(t, nil)
	auth := "Bearer " + bobKey
	addCall := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"alpha__add","arguments":{"a":40,"b":2}}}`
	}
	before := up.calls.Load()
	check := func(label, body string) {
		t.Helper()
		if strings.Contains(body, "42") {
			t.Errorf("%s: the denied tool ran: %s", label, body)
		}
	}

	// Before initialize, on the stateful protocol.
	resp, body := post(t, srv.URL+"/mcp", addCall("1"), map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2025-11-25"})
	check("before initialize", body)
	if resp.StatusCode == http.StatusOK && !strings.Contains(body, `"error"`) {
		t.Errorf("a call before initialize was served: %d %s", resp.StatusCode, body)
	}

	// A 2025-03-26 session, which allows batches.
	init := strings.Replace(initBody, "2025-11-25", "2025-03-26", 1)
	resp, _ = post(t, srv.URL+"/mcp", init, map[string]string{"Authorization": auth})
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session: %d", resp.StatusCode)
	}
	h := map[string]string{"Authorization": auth, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-03-26"}
	post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	for label, body := range map[string]string{
		"batch":              "[" + addCall("1") + "," + addCall(`"1"`) + "," + addCall("1") + "]",
		"batch with allowed": `[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"message":"x"}}},` + addCall("7") + "]",
		"string id":          addCall(`"abc"`),
		"negative id":        addCall("-1"),
		"huge id":            addCall("123456789012345678901234567890"),
		"fractional id":      addCall("1.5"),
		"null id":            addCall("null"),
		"object id":          addCall(`{"a":1}`),
		"notification":       `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"alpha__add","arguments":{"a":40,"b":2}}}`,
		"method case":        strings.Replace(addCall("1"), "tools/call", "Tools/Call", 1),
		"method space":       strings.Replace(addCall("1"), "tools/call", "tools/call ", 1),
		"duplicate name key": `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"alpha__echo","name":"alpha__add","arguments":{"a":40,"b":2,"message":"x"}}}`,
	} {
		_, body := post(t, srv.URL+"/mcp", body, h)
		check(label, body)
	}
	// A session id of alice's cannot be used with bob's key, and vice versa.
	resp, _ = post(t, srv.URL+"/mcp", initBody, map[string]string{"Authorization": "Bearer " + aliceKey})
	aliceSID := resp.Header.Get("Mcp-Session-Id")
	resp, body = post(t, srv.URL+"/mcp", addCall("3"), map[string]string{"Authorization": auth, "Mcp-Session-Id": aliceSID, "Mcp-Protocol-Version": "2025-11-25"})
	check("alice's session with bob's key", body)
	if resp.StatusCode == http.StatusOK {
		t.Errorf("bob used alice's session: %d %s", resp.StatusCode, body)
	}
	// 2026-07-28 has no initialize: policy applies to the first request.
	_, body = post(t, srv.URL+"/mcp", addCall("4"), map[string]string{"Authorization": auth, "Mcp-Protocol-Version": "2026-07-28"})
	check("stateless", body)

	// Only bob's allowed echo (one in the batch with allowed) and nothing
	// else reached the upstream.
	if n := up.calls.Load() - before; n > 2 {
		t.Errorf("the upstream received %d requests; want at most the allowed echo calls", n)
	}
}

// TestSSESessionIsBoundToItsPrincipal: a legacy SSE session opened by alice
// cannot be driven with bob's key, on /sse and on a toolset's /sse/<name>
// (which, until a review found it, bound nothing).
func TestSSESessionIsBoundToItsPrincipal(t *testing.T) {
	_, srv, _ := teamGateway(t, func(c *config.Config) {
		c.Toolsets = map[string]config.Toolset{"dev": {Name: "dev", Servers: []string{"alpha"}}}
	})
	for _, path := range []string{"/sse", "/sse/dev"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+aliceKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			endpoint := ""
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					endpoint = data
					break
				}
			}
			if !strings.Contains(endpoint, "sessionid=") {
				t.Fatalf("no endpoint event (status %d)", resp.StatusCode)
			}
			if !strings.HasPrefix(endpoint, path+"?") && !strings.HasPrefix(endpoint, srv.URL+path+"?") {
				t.Fatalf("endpoint %q is not under %s", endpoint, path)
			}
			endpoint = strings.TrimPrefix(endpoint, srv.URL)
			r, body := post(t, srv.URL+endpoint, initBody, map[string]string{"Authorization": "Bearer " + bobKey})
			if r.StatusCode != http.StatusNotFound {
				t.Errorf("bob's POST to alice's SSE session: %d %s; want 404", r.StatusCode, body)
			}
			r, body = post(t, srv.URL+endpoint, initBody, map[string]string{"Authorization": "Bearer " + aliceKey})
			if r.StatusCode != http.StatusAccepted {
				t.Errorf("alice's POST to her SSE session: %d %s; want 202", r.StatusCode, body)
			}
			r, _ = post(t, srv.URL+endpoint, initBody, nil)
			if r.StatusCode != http.StatusUnauthorized {
				t.Errorf("unauthenticated POST to an SSE session: %d; want 401", r.StatusCode)
			}
		})
	}
}

// TestStdioCallBeforeInitialize: a stdio client that skips initialize gets
// no denied tool either.
func TestStdioCallBeforeInitialize(t *testing.T) {
	h := newHarnessWith(t, lockdown("x"), upstreamSpec{name: "alpha", demoName: "alpha"})
	fromClient, toGateway := io.Pipe()
	fromGateway, toClient := io.Pipe()
	before := h.ups["alpha"].calls.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.gw.ServeStdio(ctx, fromClient, toClient) }()
	go toGateway.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"message":"leak"}}}` + "\n"))
	answer, err := bufio.NewReader(fromGateway).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	toGateway.Close()
	<-done
	if strings.Contains(answer, "leak") || !strings.Contains(answer, `"error"`) {
		t.Errorf("stdio answer: %s", answer)
	}
	if n := h.ups["alpha"].calls.Load() - before; n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

// pathServer is an upstream that resolves file URIs the way file servers
// do (parse, then clean the path), with one secret file.
func pathServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fs"}, nil)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///{+path}", Name: "file"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			u, err := url.Parse(req.Params.URI)
			if err != nil {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			text := "public"
			if path.Clean(u.Path) == "/data/secret.txt" {
				text = "SECRET"
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
		})
	return s
}

func TestLooseURIsCannotReachADeniedResource(t *testing.T) {
	h := newHarnessWith(t, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Resources: []string{"manifold://fs/file:///data/secret.txt"}}},
		}}
	}, upstreamSpec{name: "fs", server: pathServer()})
	ctx := context.Background()
	for _, uri := range []string{
		"manifold://fs/file:///data/secret.txt",
		"manifold://fs/file:///data//secret.txt",
		"manifold://fs/file:////data/secret.txt",
		"manifold://fs/file:///data/secret.txt?x",
		"manifold://fs/file:///data/secret.txt#x",
		"manifold://fs/file:///data/secret.txt/",
		"manifold://fs/file:///data/x/../secret.txt",
	} {
		if res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %q succeeded: %q", uri, textOfResource(res))
		}
	}
	res, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://fs/file:///data/public.txt?x"})
	if err != nil || textOfResource(res) != "public" {
		t.Errorf("an allowed file with a query: %v %v", res, err)
	}
}

// TestParamHeadersDoNotRevealDeniedTools: on 2026-07-28 a call of a denied
// tool whose schema mirrors arguments into Mcp-Param-* headers is answered
// as a call of a tool that does not exist.
func TestParamHeadersDoNotRevealDeniedTools(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "alpha"}, nil)
	srv.AddTool(&mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	})
	_, hs, up := teamGatewayWith(t, srv, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(key, name string) (int, string) {
		resp, body := post(t, hs.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{"region":"eu"},`+meta+`}}`,
			map[string]string{"Authorization": "Bearer " + key, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
		return resp.StatusCode, strings.ReplaceAll(body, name, "NAME")
	}
	before := up.calls.Load()
	deniedStatus, denied := call(bobKey, "alpha__regional")
	unknownStatus, unknown := call(bobKey, "alpha__nothing")
	if deniedStatus != unknownStatus || denied != unknown {
		t.Errorf("denied tool: %d %s\nunknown tool: %d %s", deniedStatus, denied, unknownStatus, unknown)
	}
	if strings.Contains(denied, "region") || strings.Contains(denied, "Region") {
		t.Errorf("the answer names the denied tool's parameter: %s", denied)
	}
	if n := up.calls.Load() - before; n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
	if _, body := call(aliceKey, "alpha__regional"); !strings.Contains(body, "ran") {
		t.Errorf("alice's call of the tool: %s", body)
	}
}
