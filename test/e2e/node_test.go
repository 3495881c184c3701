package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// nodeStep is one step of test/node/client.mjs; see its README.
type nodeStep map[string]any

// nodeOutput is client.mjs's report.
type nodeOutput struct {
	Error           string         `json:"error"`
	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      map[string]any `json:"serverInfo"`
	Instructions    string         `json:"instructions"`
	Steps           []nodeResult   `json:"steps"`
	Notifications   []nodeMessage  `json:"notifications"`
	ServerRequests  []nodeMessage  `json:"serverRequests"`
}

// nodeMessage is a notification or a server→client request client.mjs
// received; T is when, in ms since it started.
type nodeMessage struct {
	ID     json.RawMessage `json:"id"` // requests only
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	T      int64           `json:"t"`
}

type nodeResult struct {
	Op     string          `json:"op"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	// RequestID is the JSON-RPC id of a single-request step (and the
	// progressToken the SDK sent with "progress": true).
	RequestID json.RawMessage `json:"requestId"`
	MS        int64           `json:"ms"` // how long the step took
	Marks     struct {
		Start, Response, End nodeMark
	} `json:"marks"`
}

// nodeMark counts the notifications and server requests client.mjs had
// received at a point of a step: indexes into nodeOutput's lists.
type nodeMark struct {
	Notifications  int `json:"notifications"`
	ServerRequests int `json:"serverRequests"`
}

// items decodes a list step's items.
func (r nodeResult) items(t *testing.T) []map[string]any {
	t.Helper()
	var l struct{ Items []map[string]any }
	if err := json.Unmarshal(r.Result, &l); err != nil {
		t.Fatalf("%s: %v", r.Op, err)
	}
	return l.Items
}

// runNodeClient runs client.mjs with args and steps, failing the test if it
// could not connect.
func runNodeClient(t *testing.T, args []string, steps []nodeStep) nodeOutput {
	t.Helper()
	out, err := execNodeClient(append([]string{"--timeout-ms", "30000"}, args...), steps, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// execNodeClient runs client.mjs with args and steps, killing it after
// limit. It reports as an error (with client.mjs's output) that it could
// not connect or did not run every step; it may be called from any
// goroutine.
func execNodeClient(args []string, steps []nodeStep, limit time.Duration) (nodeOutput, error) {
	in, _ := json.Marshal(steps)
	cmd := exec.Command("node", append([]string{filepath.Join(nodeDir, "client.mjs")}, args...)...)
	cmd.Dir = nodeDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nodeOutput{}, err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return nodeOutput{}, fmt.Errorf("client.mjs did not finish in %s; stderr:\n%s", limit, stderr.String())
	}
	var out nodeOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Error != "" {
		return out, fmt.Errorf("client.mjs %v: %v %s\nstdout: %s\nstderr: %s", args, err, out.Error, stdout.String(), stderr.String())
	}
	if len(out.Steps) != len(steps) {
		return out, fmt.Errorf("client.mjs ran %d of %d steps; stderr:\n%s", len(out.Steps), len(steps), stderr.String())
	}
	return out, nil
}

// stdioArgs is client.mjs's argument list to start cmd args… over stdio.
func stdioArgs(cmd string, args ...string) []string {
	out := []string{"--transport", "stdio", "--inherit-env", "--command", cmd}
	for _, a := range args {
		out = append(out, "--arg", a)
	}
	return out
}

// names returns the "name" (or "uri"/"uriTemplate") of list items.
func names(items []map[string]any, key string) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprint(it[key]))
	}
	return out
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// awaitServing waits until g serves HTTP and notes its address; it fails
// at once, with the gateway's log, if the gateway exits first.
func awaitServing(g *gatewayProc, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		g.logs.mu.Lock()
		var line string
		for _, l := range g.logs.lines {
			if strings.Contains(l, `"msg":"serving"`) {
				line = l
				break
			}
		}
		g.logs.mu.Unlock()
		if line != "" {
			var rec struct{ Addr string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Addr == "" {
				return fmt.Errorf("cannot read address from %q: %v", line, err)
			}
			g.addr = rec.Addr
			return nil
		}
		select {
		case <-g.done:
			return fmt.Errorf("gateway exited before serving; log:\n%s", g.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway not serving after %s; log:\n%s", d, g.logs.String())
		}
	}
}

// callText is the text content of a tools/call result, joined.
func callText(t *testing.T, r nodeResult) string {
	t.Helper()
	var res struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("%s result: %v: %s", r.Op, err, r.Result)
	}
	if res.IsError {
		t.Errorf("%s: isError: %s", r.Op, r.Result)
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func mustContain(t *testing.T, what, s string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			t.Errorf("%s lacks %q:\n%s", what, f, s)
		}
	}
}

// within returns the messages of list (by method) with index in [from, to).
func within(list []nodeMessage, method string, from, to int) []nodeMessage {
	var out []nodeMessage
	for i, m := range list {
		if i >= from && i < to && m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// jsonOf is v as JSON, for failure messages.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// params decodes a message's params.
func params(t *testing.T, m nodeMessage) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("%s params: %v: %s", m.Method, err, m.Params)
	}
	return p
}
