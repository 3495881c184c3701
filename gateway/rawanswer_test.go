package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestStatelessResult: a 2026-07-28 client's result gets resultType
// (unless the upstream set one) and the gateway's serverInfo in _meta, in
// every shape of result, and stays valid JSON.
func TestStatelessResult(t *testing.T) {
	g := &Gateway{serverInfo: []byte(`{"name":"manifold"}`)}
	const info = `"io.modelcontextprotocol/serverInfo":{"name":"manifold"}`
	tests := []struct{ res, want string }{
		{`{}`, `{"resultType":"complete","_meta":{` + info + `}}`},
		{` { "content" : [] } `, `{"resultType":"complete","_meta":{` + info + `},"content":[]}`},
		{`{"resultType":"input_required","x":1}`, `{"resultType":"input_required","x":1,"_meta":{` + info + `}}`},
		{`{"content":[],"_meta":{}}`, `{"resultType":"complete","content":[],"_meta":{` + info + `}}`},
		{`{"resultType":"complete","_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, `{"resultType":"complete","_meta":{"k":1,` + info + `}}`},
		{`{"_meta":{"k":1}}`, `{"resultType":"complete","_meta":{"k":1,` + info + `}}`},
		{`{"resultType":1,"resultType":2}`, `{"resultType":1,"resultType":2}`}, // not simple: as it is
	}
	for _, tt := range tests {
		var a rawAnswer
		g.statelessResult(&a, []byte(tt.res))
		var got, want any
		if err := json.Unmarshal(a.bytes(), &got); err != nil {
			t.Errorf("%s → %s: %v", tt.res, a.bytes(), err)
			continue
		}
		json.Unmarshal([]byte(tt.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s → %s, want %s", tt.res, a.bytes(), tt.want)
		}
	}
}

// TestRawAnswerWriteLine: an answer goes out as one line whatever its
// size, line breaks of the upstream's JSON turned into spaces.
func TestRawAnswerWriteLine(t *testing.T) {
	for _, size := range []int{10, joinedLineMax + 10} {
		var a rawAnswer
		a.add([]byte(`{"jsonrpc":"2.0","id":1,"result":`))
		a.add([]byte("{\r\n  \"text\": \"" + strings.Repeat("x", size) + "\"\n}"))
		a.add(rawResultTail)
		var out bytes.Buffer
		if err := a.writeLine(&out); err != nil {
			t.Fatal(err)
		}
		line := out.Bytes()
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' || bytes.ContainsRune(line, '\r') {
			t.Fatalf("size %d: not one line", size)
		}
		if !json.Valid(line) {
			t.Fatalf("size %d: not JSON", size)
		}
	}
}
