package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"testing"
)

var markerRE = regexp.MustCompile(`\[REDACTED:[a-z0-9_]+\]`)

// markers counts the markers in the string values and keys of a valid
// JSON document.
func markers(t *testing.T, doc []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers beyond float64 are valid JSON
	n := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("Token: %v in %q", err, doc)
		}
		if s, ok := tok.(string); ok {
			n += len(markerRE.FindAllStringIndex(s, -1))
		}
	}
}

// checkJSON asserts what JSON promises for any input: an error exactly for
// input that is not JSON, else valid JSON out with one marker per count,
// raw itself when nothing was found, and nothing found a second time.
func checkJSON(t *testing.T, r *Redactor, in []byte) {
	out, n, err := r.JSON(in)
	if err != nil {
		if json.Valid(in) {
			t.Fatalf("JSON(%q): %v, but it is valid JSON", in, err)
		}
		return
	}
	if !json.Valid(in) {
		t.Fatalf("JSON(%q) accepted what is not JSON", in)
	}
	if !json.Valid(out) {
		t.Fatalf("JSON(%q) = %q: not valid JSON", in, out)
	}
	total := 0
	for kind, c := range n {
		if c <= 0 || kind == "" {
			t.Fatalf("JSON(%q): counts %v", in, n)
		}
		total += c
	}
	if added := markers(t, out) - markers(t, in); added != total {
		t.Fatalf("JSON(%q) = %q: %d markers added, counts %v", in, out, added, n)
	}
	if n == nil && !bytes.Equal(out, in) {
		t.Fatalf("JSON(%q) = %q without counts", in, out)
	}
	again, n2, err := r.JSON(out)
	if err != nil || n2 != nil || !bytes.Equal(again, out) {
		t.Fatalf("JSON is not idempotent: %q → %q → %q (%v, %v)", in, out, again, n2, err)
	}
}

var fuzzSeeds = []string{
	`{"content":[{"type":"text","text":"Echo: AKIAIOSFODNN7EXAMPLE alice@example.com"}]}`,
	`["ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000", "+1 (415) 555-0123", "4111 1111 1111 1111"]`,
	`{"a":"DE89 3704 0044 0532 0130 00\npassword=Xk9mQ2vL7pR4wZ"}`,
	`"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"`,
	`"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig [REDACTED:email] x@y.zz"`,
	`{"k\u0041":"\ud83d\ude00 \u0041KIAIOSFODNN7EXAMPLE \ud800"}`,
	`[1, true, null, {"": ""}]`,
	`{"password" : "Xk9mQ2vL7pR4wZ", "api_key":["x"], "token":"[REDACTED:x]"}`,
}

// FuzzJSON feeds JSON arbitrary documents (a tool result comes from an
// upstream server, which the gateway does not trust).
func FuzzJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	r, err := New([]byte(`{"custom":[{"name":"ticket","pattern":"T-([0-9]+)"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkJSON(t, r, in) })
}

// FuzzText feeds JSON one string value of arbitrary text, which reaches
// the detectors whatever the fuzzer writes.
func FuzzText(f *testing.F) {
	for _, s := range []string{
		"AKIAIOSFODNN7EXAMPLE alice@example.com", "+44 20 7946 0958 / 020 7946 0958", "3782 822463 10005",
		"GB82 WEST 1234 5698 7654 32", "api_key: 'q8Jf3kLx92mZp0Rt'", "xoxb-0000000000-FAKEfake",
		"-----BEGIN EC PRIVATE KEY-----\\nMHc", "a.@b.cc ..@x.yy [REDACTED:x]@a.bc",
	} {
		f.Add(s)
	}
	r, err := New(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := json.Marshal(s)
		if err != nil {
			t.Skip()
		}
		checkJSON(t, r, in)
	})
}
