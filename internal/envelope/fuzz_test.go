package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var seeds = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":{"x":[1,{"y":null}]},"_meta":{"progressToken":"p1"}}}`,
	`{"jsonrpc":"2.0","id":"s","method":"resources/read","params":{"uri":"file:///a\u00e9"}}`,
	`{"jsonrpc":"2.0","id":"mf-1","result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}`,
	`{"params":{"name":"a","name":"b"}}`,
	`{"params":{"name":"a","na\u006de":"b"}}`,
	`{"params":{"Name":"a","name":"b"}}`,
	`{"method":"a\ud800\udc00","params":{"_meta":{"progressToken":-0.5e+2}}}`,
	`{"params":{"name":"n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.x":1,"progressToken":"t","k":[],"io.modelcontextprotocol/clientCapabilities":{"a":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"info"}}}`,
	`[1,2]`, `{"id":01}`, `{"a":"\u12"}`, "", "  ", `{"x":{"y":[true,false,null]}}`,
}

// wireEnvelope is the envelope as encoding/json decodes it.
type wireEnvelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

type wireParams struct {
	Name      *string         `json:"name"`
	URI       *string         `json:"uri"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}

type wireMeta struct {
	ProgressToken   json.RawMessage `json:"progressToken"`
	ProtocolVersion *string         `json:"io.modelcontextprotocol/protocolVersion"`
	Capabilities    json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	Info            json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	LogLevel        *string         `json:"io.modelcontextprotocol/logLevel"`
}

// checkAgainstJSON fails unless encoding/json decodes every field of msg
// as Scan found it.
func checkAgainstJSON(t *testing.T, msg []byte, e Envelope) {
	t.Helper()
	var w wireEnvelope
	if err := json.Unmarshal(msg, &w); err != nil {
		t.Fatalf("Scan accepted %q, encoding/json: %v", msg, err)
	}
	str := func(field string, sp Span, v *string) {
		switch {
		case sp.Present() != (v != nil):
			t.Fatalf("%s in %q: Scan present %v, encoding/json %v", field, msg, sp.Present(), v != nil)
		case v != nil && string(Text(sp.In(msg))) != *v:
			t.Fatalf("%s in %q: Scan %q, encoding/json %q", field, msg, Text(sp.In(msg)), *v)
		}
	}
	raw := func(field string, sp Span, v json.RawMessage) {
		if !bytes.Equal(sp.In(msg), v) {
			t.Fatalf("%s in %q: Scan %q, encoding/json %q", field, msg, sp.In(msg), v)
		}
	}
	str("jsonrpc", e.JSONRPC, w.JSONRPC)
	raw("id", e.ID, w.ID)
	str("method", e.Method, w.Method)
	raw("params", e.Params, w.Params)
	raw("result", e.Result, w.Result)
	raw("error", e.Error, w.Error)
	var p wireParams
	if w.Params != nil {
		if err := json.Unmarshal(w.Params, &p); err != nil {
			t.Fatalf("params of %q: %v", msg, err)
		}
	}
	str("name", e.Name, p.Name)
	str("uri", e.URI, p.URI)
	raw("arguments", e.Arguments, p.Arguments)
	raw("_meta", e.Meta, p.Meta)
	var m wireMeta
	if p.Meta != nil {
		if err := json.Unmarshal(p.Meta, &m); err != nil {
			t.Fatalf("_meta of %q: %v", msg, err)
		}
	}
	raw("progressToken", e.ProgressToken, m.ProgressToken)
	str("protocolVersion", e.ProtocolVersion, m.ProtocolVersion)
	raw("clientCapabilities", e.ClientCapabilities, m.Capabilities)
	raw("clientInfo", e.ClientInfo, m.Info)
	str("logLevel", e.LogLevel, m.LogLevel)
	// A string id or token must decode alike too.
	for _, sp := range []Span{e.ID, e.ProgressToken} {
		if v := sp.In(msg); len(v) > 0 && v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil || s != string(Text(v)) {
				t.Fatalf("string %s in %q: Text %q, encoding/json %q (%v)", v, msg, Text(v), s, err)
			}
		}
	}
}

// FuzzScan: Scan agrees with encoding/json on validity and, for every
// message it calls simple, on every field; a rewrite changes exactly the
// name (or URI) and the id.
func FuzzScan(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), "n\"é\x00\xff")
	}
	f.Fuzz(func(t *testing.T, msg []byte, name string) {
		e, err := Scan(msg)
		valid := json.Valid(msg)
		switch {
		case errors.Is(err, ErrSyntax) && valid:
			t.Fatalf("Scan(%q) = %v, but encoding/json finds it valid", msg, err)
		case err == nil && !valid:
			t.Fatalf("Scan accepted %q, which encoding/json finds invalid", msg)
		case err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrNotSimple):
			t.Fatalf("Scan(%q) = %v: neither ErrSyntax nor ErrNotSimple", msg, err)
		}
		if verr := Validate(msg); (verr == nil) != valid && !errors.Is(verr, errDepth) {
			t.Fatalf("Validate(%q) = %v, encoding/json valid %v", msg, verr, valid)
		}
		if err != nil {
			return
		}
		checkAgainstJSON(t, msg, e)
		checkRewrite(t, msg, e, name)
	})
}

func checkRewrite(t *testing.T, msg []byte, e Envelope, name string) {
	t.Helper()
	ed := Edit{Name: name, SetName: e.Name.Present(), URI: name, SetURI: e.URI.Present()}
	if e.ID.Present() {
		ed.ID = []byte(`"mf-1"`)
	}
	// Per-hop members: those whose key starts with the name's first byte
	// are dropped, and one is added.
	if e.Params.Present() && name != "" {
		ed.MetaDrop = name[:1]
		ed.MetaAdd = []byte(`"zz-added":true`)
		if e.ProgressToken.Present() {
			ed.ProgressToken = []byte(`"tok"`)
		}
	}
	out, err := e.Rewrite(msg, ed)
	if err != nil {
		t.Fatalf("Rewrite(%q): %v", msg, err)
	}
	var in, got any
	if err := json.Unmarshal(msg, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("Rewrite(%q) = %q, invalid: %v", msg, out, err)
	}
	// What encoding/json makes of the name once encoded.
	enc, _ := json.Marshal(name)
	var want string
	_ = json.Unmarshal(enc, &want)
	top := in.(map[string]any)
	if ed.ID != nil {
		top["id"] = "mf-1"
	}
	if params, ok := top["params"].(map[string]any); ok {
		if ed.SetName {
			params["name"] = want
		}
		if ed.SetURI {
			params["uri"] = want
		}
		if ed.MetaAdd != nil {
			meta, _ := params["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
				params["_meta"] = meta
			}
			for k := range meta {
				if strings.HasPrefix(k, ed.MetaDrop) {
					delete(meta, k)
				}
			}
			if ed.ProgressToken != nil {
				meta["progressToken"] = "tok"
			}
			meta["zz-added"] = true
		}
	}
	if !reflect.DeepEqual(in, got) {
		t.Fatalf("Rewrite(%q) = %q:\ndecoded %v\nwant    %v", msg, out, got, in)
	}
	if e2, err := Scan(out); err != nil || e2.Name.Present() != e.Name.Present() {
		t.Fatalf("Scan of the rewrite %q: %v", out, err)
	}
}

// firstWins decodes the members of a JSON object keeping the first of
// duplicate keys (as some upstreams do), keys decoded, values raw.
func firstWins(raw []byte) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k := tok.(string); out[k] == nil {
			out[k] = v
		}
	}
	return out
}

// FuzzDuplicateKeys: whatever the duplicate, escaped or case-folded keys,
// a message Scan calls simple has the same name, uri, method and id for a
// decoder keeping the first of duplicates, one keeping the last, and one
// folding case (encoding/json).
func FuzzDuplicateKeys(f *testing.F) {
	f.Add("name", "na\\u006de", "x", "y", "params")
	f.Add("name", "NAME", "x", "y", "params")
	f.Add("uri", "uri", "x", "y", "Params")
	f.Add("method", "m\\u0065thod", "x", "y", "params")
	f.Add("name", "nam\u0065", "x", "y", "param\u017f")
	f.Fuzz(func(t *testing.T, k1, k2, v1, v2, pk string) {
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		// Keys are written as given (they may hold escapes), values encoded.
		params := `{"` + k1 + `":` + q(v1) + `,"` + k2 + `":` + q(v2) + `}`
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","` + k1 + `":` + q(v1) + `,"` + pk + `":` + params + `}`)
		e, err := Scan(msg)
		if err != nil {
			return
		}
		checkAgainstJSON(t, msg, e)
		top := firstWins(msg)
		if top == nil {
			t.Fatalf("Scan accepted %q, the first-wins decoder did not", msg)
		}
		first := firstWins(top["params"])
		for _, c := range []struct {
			field string
			sp    Span
			raw   json.RawMessage
		}{
			{"method", e.Method, top["method"]}, {"id", e.ID, top["id"]},
			{"name", e.Name, first["name"]}, {"uri", e.URI, first["uri"]},
		} {
			if !bytes.Equal(c.sp.In(msg), c.raw) {
				t.Fatalf("%s in %q: Scan %q, first-wins %q", c.field, msg, c.sp.In(msg), c.raw)
			}
		}
		// No key of the levels Scan reads may fold onto a name it reads.
		for k := range top {
			for _, n := range topNames {
				if k != n && strings.EqualFold(k, n) {
					t.Fatalf("Scan accepted %q with key %q folding onto %q", msg, k, n)
				}
			}
		}
		for k := range first {
			for _, n := range paramsNames {
				if k != n && strings.EqualFold(k, n) {
					t.Fatalf("Scan accepted %q with params key %q folding onto %q", msg, k, n)
				}
			}
		}
	})
}

// FuzzMembers: on any bytes (an upstream's result), Members, RemoveMember
// and HasKey agree with encoding/json: the values Members finds are the
// members' values, RemoveMember's output decodes to the object without the
// key, and a key present at any depth makes HasKey true.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"x"}],"isError":true,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}}}`,
		`{"a":1,"uri":"x"}`, `{ "_meta" : { } , "b" : [ {"uri" : 1} ] }`, `{"isError":false,"isError":true}`,
		`{"IsError":true}`, `{"is\u0045rror":true}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s), "isError")
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		if key == "" {
			return // no caller looks for the empty key
		}
		var m map[string]json.RawMessage
		decodes := json.Unmarshal(obj, &m) == nil && m != nil
		var spans [1]Span
		if err := Members(obj, []string{key}, spans[:]); err == nil {
			if !decodes {
				t.Fatalf("Members accepted %q, which is not a JSON object", obj)
			}
			if got := spans[0].In(obj); !bytes.Equal(got, bytes.TrimSpace(m[key])) && !(got == nil && m[key] == nil) {
				t.Fatalf("Members(%q, %q) = %q, encoding/json %q", obj, key, got, m[key])
			}
		}
		out, removed, err := RemoveMember(obj, key)
		if err == nil {
			var after map[string]json.RawMessage
			if json.Unmarshal(out, &after) != nil {
				t.Fatalf("RemoveMember(%q, %q) = %q: not JSON", obj, key, out)
			}
			if _, ok := after[key]; ok {
				t.Fatalf("RemoveMember(%q, %q) = %q still holds the key", obj, key, out)
			}
			if _, had := m[key]; removed != had {
				t.Fatalf("RemoveMember(%q, %q): removed %v, encoding/json finds it %v", obj, key, removed, had)
			}
		}
		if has, err := HasKey(obj, key); err == nil && decodes {
			if _, ok := m[key]; ok && !has {
				t.Fatalf("HasKey(%q, %q) = false; the key is there", obj, key)
			}
		}
	})
}
