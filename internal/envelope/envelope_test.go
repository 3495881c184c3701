package envelope

import (
	"errors"
	"strings"
	"testing"
)

// fields renders what Scan found, for comparison in tables.
func fields(msg []byte, e Envelope) map[string]string {
	out := map[string]string{}
	for name, sp := range map[string]Span{
		"jsonrpc": e.JSONRPC, "id": e.ID, "method": e.Method, "params": e.Params,
		"result": e.Result, "error": e.Error, "name": e.Name, "uri": e.URI,
		"arguments": e.Arguments, "_meta": e.Meta, "progressToken": e.ProgressToken,
		"protocolVersion": e.ProtocolVersion, "clientCapabilities": e.ClientCapabilities,
		"clientInfo": e.ClientInfo, "logLevel": e.LogLevel,
	} {
		if sp.Present() {
			out[name] = string(sp.In(msg))
		}
	}
	return out
}

func TestScan(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    map[string]string
		wantErr error
	}{
		{
			name: "a tools/call",
			msg:  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"x":[1,{"y":null}]},"_meta":{"progressToken":"p1","k":true}}}`,
			want: map[string]string{"jsonrpc": `"2.0"`, "id": "7", "method": `"tools/call"`,
				"params":    `{"name":"a__echo","arguments":{"x":[1,{"y":null}]},"_meta":{"progressToken":"p1","k":true}}`,
				"name":      `"a__echo"`,
				"arguments": `{"x":[1,{"y":null}]}`, "_meta": `{"progressToken":"p1","k":true}`, "progressToken": `"p1"`},
		},
		{
			name: "blanks everywhere and a resources/read",
			msg:  " \n{ \"id\" : \"s-1\" ,\t\"method\":\"resources/read\", \"params\" : { \"uri\" : \"file:///a\" } , \"jsonrpc\":\"2.0\" }\r\n",
			want: map[string]string{"jsonrpc": `"2.0"`, "id": `"s-1"`, "method": `"resources/read"`,
				"params": `{ "uri" : "file:///a" }`, "uri": `"file:///a"`},
		},
		{
			name: "a result",
			msg:  `{"jsonrpc":"2.0","id":"mf-1","result":{"content":[{"type":"text","text":"hi\n\u00e9"}]}}`,
			want: map[string]string{"jsonrpc": `"2.0"`, "id": `"mf-1"`, "result": `{"content":[{"type":"text","text":"hi\n\u00e9"}]}`},
		},
		{
			name: "an error",
			msg:  `{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32601,"message":"no"}}`,
			want: map[string]string{"jsonrpc": `"2.0"`, "id": `-1.5e3`, "error": `{"code":-32601,"message":"no"}`},
		},
		{
			name: "an escaped name is decoded, not refused",
			msg:  `{"method":"tools/call","params":{"name":"a\u005f_x\"y"}}`,
			want: map[string]string{"method": `"tools/call"`, "params": `{"name":"a\u005f_x\"y"}`, "name": `"a\u005f_x\"y"`},
		},
		{
			name: "the 2026-07-28 per-request members",
			msg:  `{"method":"tools/call","params":{"name":"n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"debug","k":1}}}`,
			want: map[string]string{"method": `"tools/call"`, "name": `"n"`,
				"params":          `{"name":"n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"debug","k":1}}`,
				"_meta":           `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"debug","k":1}`,
				"protocolVersion": `"2026-07-28"`, "clientCapabilities": `{"x":{}}`, "clientInfo": `{"name":"c"}`, "logLevel": `"debug"`},
		},
		{name: "clientCapabilities not an object", msg: `{"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":[]}}}`, wantErr: errType},
		{name: "a duplicate protocol version", msg: `{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"b"}}}`, wantErr: errDuplicate},
		{name: "a duplicate name", msg: `{"method":"tools/call","params":{"name":"a","name":"b"}}`, wantErr: errDuplicate},
		{name: "a duplicate method", msg: `{"method":"ping","method":"tools/call"}`, wantErr: errDuplicate},
		{name: "a duplicate id", msg: `{"id":1,"id":2,"result":{}}`, wantErr: errDuplicate},
		{name: "a duplicate params", msg: `{"params":{},"params":{"name":"x"}}`, wantErr: errDuplicate},
		{name: "a duplicate progress token", msg: `{"params":{"_meta":{"progressToken":1,"progressToken":2}}}`, wantErr: errDuplicate},
		{name: "an escaped key that spells name", msg: `{"params":{"name":"a","na\u006de":"b"}}`, wantErr: errKey},
		{name: "any escaped key in params", msg: `{"params":{"x\n":1}}`, wantErr: errKey},
		{name: "a case variant", msg: `{"params":{"Name":"a"}}`, wantErr: errKey},
		{name: "a Unicode fold of params (long s)", msg: `{"paramſ":{"name":"a"}}`, wantErr: errKey},
		{name: "a Kelvin sign in _meta", msg: `{"params":{"_meta":{"progressToKen":1}}}`, wantErr: errKey},
		{name: "params not an object", msg: `{"params":["a"]}`, wantErr: errType},
		{name: "name not a string", msg: `{"params":{"name":1}}`, wantErr: errType},
		{name: "id an object", msg: `{"id":{},"method":"x"}`, wantErr: errType},
		{name: "id null", msg: `{"id":null,"method":"x"}`, wantErr: errType},
		{name: "arguments not an object", msg: `{"params":{"arguments":[]}}`, wantErr: errType},
		{name: "invalid UTF-8 in a name", msg: "{\"params\":{\"name\":\"a\xff\"}}", wantErr: errText},
		{name: "an unpaired surrogate in a method", msg: `{"method":"a\ud800"}`, wantErr: errText},
		{name: "a batch", msg: `[{"method":"x"}]`, wantErr: errNotObject},
		{name: "too deep", msg: `{"params":{"arguments":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + "}}", wantErr: errDepth},
		{name: "empty", msg: "", wantErr: ErrTruncated},
		{name: "truncated in a string", msg: `{"method":"tools/ca`, wantErr: ErrTruncated},
		{name: "truncated after a value", msg: `{"id":1`, wantErr: ErrTruncated},
		{name: "truncated in a literal", msg: `{"params":{"x":tr`, wantErr: ErrTruncated},
		{name: "trailing data", msg: `{"id":1}{"id":2}`, wantErr: ErrSyntax},
		{name: "a control character in a string", msg: "{\"a\":\"\n\"}", wantErr: ErrSyntax},
		{name: "a bad escape", msg: `{"a":"\x"}`, wantErr: ErrSyntax},
		{name: "a leading zero", msg: `{"id":01}`, wantErr: ErrSyntax},
		{name: "a trailing comma", msg: `{"id":1,}`, wantErr: ErrSyntax},
		{name: "a missing colon", msg: `{"id" 1}`, wantErr: ErrSyntax},
		{name: "a mismatched bracket", msg: `{"x":[}`, wantErr: ErrSyntax},
		{name: "a bad literal", msg: `{"x":nul}`, wantErr: ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Scan([]byte(tt.msg))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Scan(%q) error = %v, want %v", tt.msg, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Scan(%q): %v", tt.msg, err)
			}
			got := fields([]byte(tt.msg), e)
			if len(got) != len(tt.want) {
				t.Errorf("fields = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %s, want %s", k, got[k], v)
				}
			}
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name string
		tok  string
		want string
	}{
		{name: "plain", tok: `"abc"`, want: "abc"},
		{name: "short escapes", tok: `"a\"\\\/\b\f\n\r\t"`, want: "a\"\\/\b\f\n\r\t"},
		{name: "unicode escapes", tok: `"\u00e9\ud83d\ude00"`, want: "é😀"},
		{name: "a number is returned as is", tok: `12`, want: "12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Text([]byte(tt.tok))); got != tt.want {
				t.Errorf("Text(%s) = %q, want %q", tt.tok, got, tt.want)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"x":1},"_meta":{"progressToken":5}}}`
	tests := []struct {
		name       string
		msg        string
		edit       Edit
		params     bool
		want       string
		wantErrIs  error
		wantNoScan bool
	}{
		{name: "name and id", msg: call, edit: Edit{ID: []byte(`"mf-1"`), Name: "echo", SetName: true},
			want: `{"jsonrpc":"2.0","id":"mf-1","method":"tools/call","params":{"name":"echo","arguments":{"x":1},"_meta":{"progressToken":5}}}`},
		{name: "every field, in message order whatever the edit's", msg: `{"params":{"_meta":{"progressToken":"t"},"name":"n"},"id":"c"}`,
			edit: Edit{ID: []byte(`9`), Name: "m", SetName: true, ProgressToken: []byte(`"u"`)},
			want: `{"params":{"_meta":{"progressToken":"u"},"name":"m"},"id":9}`},
		{name: "a name that needs escaping", msg: call, edit: Edit{Name: "q\"\\\n\x01\u2028\xff", SetName: true},
			want: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"q\"\\\n\u0001\u2028\ufffd","arguments":{"x":1},"_meta":{"progressToken":5}}}`},
		{name: "a uri", msg: `{"id":1,"method":"resources/read","params":{"uri":"a://x"}}`, edit: Edit{URI: "file:///é", SetURI: true},
			want: `{"id":1,"method":"resources/read","params":{"uri":"file:///é"}}`},
		{name: "params only", msg: call, params: true, edit: Edit{ID: []byte(`1`), Name: "echo", SetName: true},
			want: `{"name":"echo","arguments":{"x":1},"_meta":{"progressToken":5}}`},
		{name: "per-hop _meta members dropped, the gateway's added, the token replaced",
			msg:    `{"id":1,"method":"tools/call","params":{"name":"n","_meta":{"io.mcp/v":"x", "progressToken" : 5,"k":{"a":[1]},"io.mcp/w":{}}}}`,
			params: true, edit: Edit{MetaDrop: "io.mcp/", MetaAdd: []byte(`"io.mcp/v":"y"`), ProgressToken: []byte(`"t-1"`)},
			want: `{"name":"n","_meta":{"progressToken" : "t-1","k":{"a":[1]},"io.mcp/v":"y"}}`},
		{name: "every _meta member dropped", msg: `{"params":{"_meta":{"io.mcp/v":1},"name":"n"}}`,
			edit: Edit{MetaDrop: "io.mcp/", Name: "m", SetName: true},
			want: `{"params":{"_meta":{},"name":"m"}}`},
		{name: "_meta added to params", msg: `{"params":{"name":"n"}}`, edit: Edit{MetaAdd: []byte(`"a":1,"b":2`)},
			want: `{"params":{"name":"n","_meta":{"a":1,"b":2}}}`},
		{name: "_meta added to empty params", msg: `{"params":{ }}`, edit: Edit{MetaAdd: []byte(`"a":1`)},
			want: `{"params":{ "_meta":{"a":1}}}`},
		{name: "nothing to add, no _meta", msg: `{"params":{"name":"n"}}`, edit: Edit{MetaDrop: "io.mcp/"},
			want: `{"params":{"name":"n"}}`},
		{name: "_meta with no params", msg: `{"id":1}`, edit: Edit{MetaAdd: []byte(`"a":1`)}, wantErrIs: ErrEdit},
		{name: "a token for a _meta without one", msg: `{"params":{"_meta":{}}}`, edit: Edit{MetaDrop: "x", ProgressToken: []byte(`1`)}, wantErrIs: ErrEdit},
		{name: "no uri to replace", msg: call, edit: Edit{URI: "x", SetURI: true}, wantErrIs: ErrEdit},
		{name: "an id that is not a scalar", msg: call, edit: Edit{ID: []byte(`{}`)}, wantErrIs: ErrEdit},
		{name: "an id with trailing bytes", msg: call, edit: Edit{ID: []byte(`1,"x":2`)}, wantErrIs: ErrEdit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Scan([]byte(tt.msg))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if tt.params {
				got, err = e.AppendParams(nil, []byte(tt.msg), tt.edit)
			} else {
				got, err = e.Rewrite([]byte(tt.msg), tt.edit)
			}
			if tt.wantErrIs != nil {
				if !errors.Is(err, tt.wantErrIs) {
					t.Fatalf("error = %v, want %v", err, tt.wantErrIs)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("rewrite = %s, %v\nwant     %s", got, err, tt.want)
			}
			if len(got) != cap(got) {
				t.Errorf("output len %d, cap %d: the size was not computed exactly", len(got), cap(got))
			}
		})
	}
}

func TestScanResponse(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		ok   bool
	}{
		{name: "a result", msg: `{"jsonrpc":"2.0","id":"mf-3","result":{}}`, ok: true},
		{name: "an error", msg: `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}`, ok: true},
		{name: "both", msg: `{"id":3,"result":{},"error":{}}`},
		{name: "neither", msg: `{"id":3}`},
		{name: "a request", msg: `{"id":3,"method":"x","result":{}}`},
		{name: "a notification", msg: `{"method":"notifications/progress","params":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScanResponse([]byte(tt.msg))
			if (err == nil) != tt.ok {
				t.Errorf("ScanResponse(%s) = %v, want ok %v", tt.msg, err, tt.ok)
			}
		})
	}
}

// TestMetaRewriteAllocs: rebuilding _meta into a buffer with room
// allocates nothing (the raw path does it on every call).
func TestMetaRewriteAllocs(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":5,"k":1}}}`)
	e, err := Scan(msg)
	if err != nil {
		t.Fatal(err)
	}
	ed := Edit{Name: "echo", SetName: true, MetaDrop: "io.modelcontextprotocol/", MetaAdd: []byte(`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`), ProgressToken: []byte(`"t"`)}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := e.AppendParams(buf[:0], msg, ed); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendParams with a _meta rebuild: %v allocs, want 0", n)
	}
}
