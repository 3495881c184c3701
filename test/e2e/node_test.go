package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
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
	Notifications   []struct {
		Method string `json:"method"`
	} `json:"notifications"`
}

type nodeResult struct {
	Op     string          `json:"op"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
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
	in, _ := json.Marshal(steps)
	cmd := exec.Command("node", append([]string{filepath.Join(nodeDir, "client.mjs"), "--timeout-ms", "30000"}, args...)...)
	cmd.Dir = nodeDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("client.mjs did not finish in 120s; stderr:\n%s", stderr.String())
	}
	var out nodeOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Error != "" {
		t.Fatalf("client.mjs %v: %v %s\nstdout: %s\nstderr: %s", args, err, out.Error, stdout.String(), stderr.String())
	}
	if len(out.Steps) != len(steps) {
		t.Fatalf("client.mjs ran %d of %d steps; stderr:\n%s", len(out.Steps), len(steps), stderr.String())
	}
	return out
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
