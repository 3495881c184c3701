package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/manifold-mcp/manifold/config"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// wantHash is the recorded form of canonical JSON under testKey, computed independently.
func wantHash(canonical string) string {
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(canonical))
	return `"hmac-sha256:` + hex.EncodeToString(mac.Sum(nil)) + `"`
}

func TestArgumentsEncode(t *testing.T) {
	nested := json.RawMessage(`{
  "query": "select 1",
  "Password": "hunter2",
  "opts": {"apiKey": "k-123", "depth": [ {"token": 7}, {"keep": "v"} ], "n": 1.50},
  "html": "<b>&</b>"
}`)
	redact := []string{"password", "api*key", "TOK?N"}
	tests := []struct {
		name     string
		mode     string
		patterns []string
		args     any
		want     string // "" means no arguments recorded
		wantErr  bool
	}{
		{name: "none records nothing", mode: config.ArgumentsNone, args: nested},
		{name: "nil records nothing", mode: config.ArgumentsFull},
		{name: "null records nothing", mode: config.ArgumentsHashed, args: json.RawMessage(" null ")},
		{name: "empty records nothing", mode: config.ArgumentsFull, args: json.RawMessage{}},
		{
			name: "full is compacted and keeps numbers and order",
			mode: config.ArgumentsFull, args: json.RawMessage("{\"b\": 1.50,\n \"a\": [1, 2]}"),
			want: `{"b":1.50,"a":[1,2]}`,
		},
		{
			name: "full redacts at any depth, ignoring case",
			mode: config.ArgumentsFull, patterns: redact, args: nested,
			want: `{"Password":"[REDACTED]","html":"<b>&</b>","opts":{"apiKey":"[REDACTED]","depth":[{"token":"[REDACTED]"},{"keep":"v"}],"n":1.50},"query":"select 1"}`,
		},
		{
			name: "full redacts a whole subtree",
			mode: config.ArgumentsFull, patterns: []string{"opts"}, args: nested,
			want: `{"Password":"hunter2","html":"<b>&</b>","opts":"[REDACTED]","query":"select 1"}`,
		},
		{
			name: "full of a Go map",
			mode: config.ArgumentsFull, patterns: redact, args: map[string]string{"city": "Paris", "token": "t"},
			want: `{"city":"Paris","token":"[REDACTED]"}`,
		},
		{
			name: "hashed is an HMAC of the canonical form",
			mode: config.ArgumentsHashed, args: json.RawMessage(`{"b": 1.50, "a": "x"}`),
			want: wantHash(`{"a":"x","b":1.5}`),
		},
		{
			name: "hashed redacts before hashing",
			mode: config.ArgumentsHashed, patterns: redact, args: json.RawMessage(`{"b": 1.50, "PASSWORD": "x"}`),
			want: wantHash(`{"PASSWORD":"[REDACTED]","b":1.5}`),
		},
		{name: "invalid JSON", mode: config.ArgumentsFull, args: json.RawMessage(`{"a":`), wantErr: true},
		{name: "invalid JSON hashed", mode: config.ArgumentsHashed, patterns: redact, args: []byte(`[1,]`), wantErr: true},
		{name: "a duplicate key cannot be canonicalised", mode: config.ArgumentsHashed, args: json.RawMessage(`{"a":1,"a":2}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newArguments(tt.mode, testKey, tt.patterns)
			got, err := a.encode(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("encode error = %v, want error %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("encode =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestHashedIgnoresFormatting(t *testing.T) {
	a := newArguments(config.ArgumentsHashed, testKey, nil)
	first, err := a.encode(json.RawMessage(`{"city": "Paris", "days": 3, "units": {"t": "C", "w": "kmh"}}`))
	if err != nil {
		t.Fatal(err)
	}
	first = append(json.RawMessage(nil), first...)
	for _, args := range []any{
		json.RawMessage("{\"units\":{\"w\":\"kmh\",\"t\":\"C\"},\n\"days\":3.0,\"city\":\"Paris\"}"),
		map[string]any{"days": 3, "city": "Paris", "units": map[string]string{"t": "C", "w": "kmh"}},
	} {
		got, err := a.encode(args)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(first) {
			t.Errorf("hash of %v = %s, want %s", args, got, first)
		}
	}
	other := newArguments(config.ArgumentsHashed, []byte("another key of at least 32 bytes!"), nil)
	got, _ := other.encode(json.RawMessage(`{"city":"Paris","days":3,"units":{"t":"C","w":"kmh"}}`))
	if string(got) == string(first) {
		t.Error("two keys give the same hash")
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"password", "password", true},
		{"password", "passwords", false},
		{"*password*", "db_password_old", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true},
		{"*key", "apikey", true},
		{"*key", "keys", false},
		{"a*b*c", "a_b_b_c", true},
		{"a*b*c", "a_c_b", false},
		{"**x", "x", true},
		{"?*", "", false},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
