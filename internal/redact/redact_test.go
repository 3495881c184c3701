package redact

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "plain", in: "http://127.0.0.1:8080/mcp", want: "http://127.0.0.1:8080/mcp"},
		{name: "query values", in: "https://h/mcp?token=s3cret&v=2", want: "https://h/mcp?token=REDACTED&v=REDACTED"},
		{name: "empty value kept", in: "http://h/?token=&x", want: "http://h/?token=&REDACTED"},
		{name: "key without value", in: "http://h/?s3cret", want: "http://h/?REDACTED"},
		{name: "empty query", in: "http://h/p?", want: "http://h/p?"},
		{name: "user and password", in: "http://alice:pw@h:1/p", want: "http://REDACTED@h:1/p"},
		{name: "user only (a token)", in: "https://ghp_token@github.com/x", want: "https://REDACTED@github.com/x"},
		{name: "net/http's stripped password", in: "http://alice:***@h/p?k=v", want: "http://REDACTED@h/p?k=REDACTED"},
		{name: "empty userinfo", in: "http://@h/", want: "http://@h/"},
		{name: "at sign in the path stays", in: "http://h/a@b", want: "http://h/a@b"},
		{name: "fragment", in: "http://h/cb#access_token=x", want: "http://h/cb#REDACTED"},
		{name: "empty fragment", in: "http://h/#", want: "http://h/#"},
		{name: "query and fragment", in: "http://h/?a=1#f", want: "http://h/?a=REDACTED#REDACTED"},
		{name: "fragment holding a ?", in: "http://h/#a?b=c", want: "http://h/#REDACTED"},
		{name: "no path", in: "http://u:p@h?x=1", want: "http://REDACTED@h?x=REDACTED"},
		{name: "relative reference", in: "/message?sessionid=abc", want: "/message?sessionid=REDACTED"},
		{name: "does not parse", in: "http://h/%zz?token=s3cret", want: "http://h/%zz?token=REDACTED"},
		{name: "space in a value", in: "http://h/?token=ab cd", want: "http://h/?token=REDACTED"},
		{name: "not a URL", in: "no secrets here", want: "no secrets here"},
		{name: "empty", in: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := URL(tc.in); got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := URL(URL(tc.in)); again != tc.want {
				t.Errorf("URL is not idempotent: %q", again)
			}
		})
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "no URL", in: "dial tcp 127.0.0.1:1: connect: connection refused", want: "dial tcp 127.0.0.1:1: connect: connection refused"},
		{
			name: "url.Error inside an SDK error",
			in:   `connect: sending "initialize": rejected: Post "http://127.0.0.1:1/mcp?token=s3cret": dial tcp 127.0.0.1:1: connect: connection refused`,
			want: `connect: sending "initialize": rejected: Post "http://127.0.0.1:1/mcp?token=REDACTED": dial tcp 127.0.0.1:1: connect: connection refused`,
		},
		{
			name: "quoted URL with a space and an escaped quote",
			in:   `Get "http://h/?token=a \"b c": EOF`,
			want: `Get "http://h/?token=REDACTED": EOF`,
		},
		{name: "unquoted URLs", in: "from http://a/?x=1 to https://u:p@b/#f.", want: "from http://a/?x=REDACTED to https://REDACTED@b/#REDACTED"},
		{name: "upper-case scheme", in: "HTTP://H/?K=V", want: "HTTP://H/?K=REDACTED"},
		{name: "scheme glued to a word", in: "x1http://h/?k=v", want: "x1http://h/?k=REDACTED"},
		{name: "digits before the scheme", in: "12http://h/?k=v", want: "12http://h/?k=REDACTED"},
		{name: "no scheme", in: "://h/?k=v", want: "://h/?k=v"},
		{name: "redirect to a relative URL", in: `Post "/mcp?session=s3cret": stopped after 10 redirects`, want: `Post "/mcp?session=REDACTED": stopped after 10 redirects`},
		{name: "redirect to a bare reference", in: `Get "x?k=v#f": EOF`, want: `Get "x?k=REDACTED#REDACTED": EOF`},
		{name: "a quoted word after another word", in: `sending "initialize?x=1"`, want: `sending "initialize?x=1"`},
		{name: "an op inside a word", in: `rePost "/p?x=1"`, want: `rePost "/p?x=1"`},
		{name: "angle brackets", in: "<http://h/?k=v>", want: "<http://h/?k=REDACTED>"},
		{name: "unterminated quote, then another URL", in: `"http://a/p http://u:s3cret@b/`, want: `"http://a/p http://REDACTED@b/`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in); got != tc.want {
				t.Errorf("Text(%q)\n = %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestHTTPClientError: the *url.Error net/http returns for an unreachable
// URL, and for a redirect loop, carries the query; Error removes it and
// keeps the chain.
func TestHTTPClientError(t *testing.T) {
	const secret = "s3cret-0123"
	client := &http.Client{Transport: failingTransport{}}
	_, err := client.Get("http://127.0.0.1:1/mcp?token=" + secret + "#frag")
	if err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("the premise: net/http's error %v shows the query", err)
	}
	wrapped := fmt.Errorf("connect: %w", err)
	red := Error(wrapped)
	if strings.Contains(red.Error(), secret) {
		t.Errorf("Error(%v) = %v", wrapped, red)
	}
	var uerr *url.Error
	if !errors.As(red, &uerr) || !errors.Is(red, io.ErrUnexpectedEOF) {
		t.Errorf("Error(%v) lost the chain", wrapped)
	}
	if Error(io.EOF) != io.EOF || Error(nil) != nil {
		t.Error("an error without a URL is not returned as it is")
	}
}

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, io.ErrUnexpectedEOF
}

// FuzzText: no panic; Text is idempotent; a URL-safe secret in a URL's
// userinfo, query value or fragment never survives, whatever text stands
// around the URL.
func FuzzText(f *testing.F) {
	for _, seed := range []struct{ before, secret, after string }{
		{`Post "`, "tok", `": EOF`},
		{`"http://a/p`, "x", ""},
		{`\`, "a-b_c", `"`},
		{"http://h/?", "z", "#"},
		{`"\"`, "q", `\`},
	} {
		f.Add(seed.before, seed.secret, seed.after, uint8(0))
	}
	f.Fuzz(func(t *testing.T, before, secret, after string, where uint8) {
		secret = "Zq9" + urlSafe(secret) // not part of the URL around it
		var u string
		switch where % 5 {
		case 0:
			u = "http://h:1/p?k=" + secret + "&z=1"
		case 1:
			u = "https://" + secret + "@h/p"
		case 2:
			u = "http://user:" + secret + "@h"
		case 3:
			u = "http://h/p?a=#" + secret
		default:
			u = "/p?k=" + secret // a relative redirect, only in a *url.Error
		}
		forms := []string{before + " " + u + " " + after, `"` + u + `"` + after, before + u}
		if where%5 == 4 {
			forms = []string{before + ` Post "` + u + `": ` + after, "Get \"" + u + `"` + after, before + u}
		}
		for i, s := range forms {
			got := Text(s)
			if Text(got) != got {
				t.Fatalf("Text(%q) = %q is not stable: %q", s, got, Text(got))
			}
			// The last form glues the URL to whatever precedes it (another
			// URL's userinfo, say): only stability is asked of it.
			if i < 2 && strings.Contains(strings.ReplaceAll(got, Mask, ""), secret) && !strings.Contains(strings.ReplaceAll(s, u, ""), secret) {
				t.Fatalf("Text(%q) = %q shows the secret %q", s, got, secret)
			}
		}
	})
}

// urlSafe keeps the letters, digits, '-' and '_' of s (a token as
// url.URL.String prints it).
func urlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (isAlpha(byte(r)) || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return r
		}
		return -1
	}, s)
}
