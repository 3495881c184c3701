package redact

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Fixture secrets are format-valid and obviously fake: AWS's documentation
// examples, FAKE in the body, card and IBAN test numbers, phone numbers
// from the ranges reserved for fiction (555-01xx, Ofcom's 020 7946 0xxx).
var (
	fakeGitHub = "ghp_" + strings.Repeat("FAKE", 8) + "0000"
	fakeJWT    = b64(`{"alg":"HS256","typ":"JWT"}`) + "." + b64(`{"sub":"fake-user"}`) + ".FAKEsignatureFAKEsignature"
	fakePEM    = "-----BEGIN RSA PRIVATE KEY-----\nMIIEFAKEFAKEFAKE\nFAKEFAKE==\n-----END RSA PRIVATE KEY-----"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// redactString runs JSON on a document that is the one string in.
func redactString(t *testing.T, r *Redactor, in string) (string, Counts) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, n, err := r.JSON(raw)
	if err != nil {
		t.Fatalf("JSON(%s): %v", raw, err)
	}
	var got string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("JSON(%s) = %s, not a JSON string: %v", raw, out, err)
	}
	return got, n
}

type detectorCase struct {
	name, in, want string
}

// testDetector runs cases with only the detector kind on, and checks that
// JSON finds no more than the case says (false positives stay).
func testDetector(t *testing.T, kind string, cases []detectorCase) {
	t.Helper()
	r, err := New([]byte(`{"detectors":["` + kind + `"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n := redactString(t, r, tc.in)
			if got != tc.want {
				t.Errorf("in  %q\ngot %q\nwant %q", tc.in, got, tc.want)
			}
			if want := strings.Count(tc.want, "[REDACTED:"+kind+"]"); n[kind] != want {
				t.Errorf("counts %v, want %d %s", n, want, kind)
			}
		})
	}
}

func TestAWSAccessKey(t *testing.T) {
	testDetector(t, "aws_access_key", []detectorCase{
		{name: "access key id", in: "key AKIAIOSFODNN7EXAMPLE here", want: "key [REDACTED:aws_access_key] here"},
		{name: "session key id", in: "ASIAIOSFODNN7EXAMPLE", want: "[REDACTED:aws_access_key]"},
		{name: "after an underscore", in: "id=AKIAIOSFODNN7EXAMPLE;", want: "id=[REDACTED:aws_access_key];"},
		{name: "too short", in: "AKIAIOSFODNN7EXAMPL", want: "AKIAIOSFODNN7EXAMPL"},
		{name: "part of a longer word", in: "AKIAIOSFODNN7EXAMPLEX", want: "AKIAIOSFODNN7EXAMPLEX"},
		{name: "inside a word", in: "xAKIAIOSFODNN7EXAMPLE", want: "xAKIAIOSFODNN7EXAMPLE"},
		{name: "not base32 (digit 0)", in: "AKIAIOSFODNN0EXAMPLE", want: "AKIAIOSFODNN0EXAMPLE"},
	})
}

func TestTokens(t *testing.T) {
	google := "AIza" + "FAKE" + strings.Repeat("x", 31)
	pat := "github_pat_11FAKE0000_" + strings.Repeat("x", 60)
	for _, tc := range []struct {
		kind  string
		cases []detectorCase
	}{
		{"google_api_key", []detectorCase{
			{name: "key", in: "key=" + google, want: "key=[REDACTED:google_api_key]"},
			{name: "one short", in: google[:38], want: google[:38]},
		}},
		{"github_token", []detectorCase{
			{name: "classic", in: "token " + fakeGitHub + ".", want: "token [REDACTED:github_token]."},
			{name: "oauth", in: "gho_" + fakeGitHub[4:], want: "[REDACTED:github_token]"},
			{name: "fine-grained", in: pat, want: "[REDACTED:github_token]"},
			{name: "too short", in: "ghp_FAKE", want: "ghp_FAKE"},
			{name: "other prefix", in: "ghx_" + fakeGitHub[4:], want: "ghx_" + fakeGitHub[4:]},
		}},
		{"gitlab_token", []detectorCase{
			{name: "personal", in: "glpat-FAKEfake0000FAKEfake", want: "[REDACTED:gitlab_token]"},
			{name: "sentence dot", in: "use glpat-FAKEfake0000FAKEfake.", want: "use [REDACTED:gitlab_token]."},
			{name: "too short", in: "glpat-FAKE", want: "glpat-FAKE"},
		}},
		{"slack_token", []detectorCase{
			{name: "bot", in: "xoxb-0000000000-0000000000000-FAKEfakeFAKEfake", want: "[REDACTED:slack_token]"},
			{name: "app", in: "xapp-1-FAKE000000-0000000000000-fake", want: "[REDACTED:slack_token]"},
			{name: "other letter", in: "xoxz-0000000000-0000000000000", want: "xoxz-0000000000-0000000000000"},
		}},
		{"stripe_key", []detectorCase{
			{name: "live secret", in: "sk_live_FAKE0000000000000000fake", want: "[REDACTED:stripe_key]"},
			{name: "restricted", in: "rk_live_FAKE0000000000000000fake", want: "[REDACTED:stripe_key]"},
			{name: "publishable key is public", in: "pk_live_FAKE0000000000000000fake", want: "pk_live_FAKE0000000000000000fake"},
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) { testDetector(t, tc.kind, tc.cases) })
	}
}

func TestPrivateKey(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\nMIIFAKE\n-----END CERTIFICATE-----"
	testDetector(t, "private_key", []detectorCase{
		{name: "RSA block", in: "key:\n" + fakePEM + "\ndone", want: "key:\n[REDACTED:private_key]\ndone"},
		{name: "PKCS8", in: "-----BEGIN PRIVATE KEY-----\nMIIFAKE\n-----END PRIVATE KEY-----", want: "[REDACTED:private_key]"},
		{name: "OpenSSH", in: "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEFAKE\\n-----END OPENSSH PRIVATE KEY-----", want: "[REDACTED:private_key]"},
		{name: "PGP", in: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBFAKE\n-----END PGP PRIVATE KEY BLOCK-----", want: "[REDACTED:private_key]"},
		{name: "cut short", in: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIFAKE\nMORE\n(truncated)", want: "[REDACTED:private_key](truncated)"},
		{name: "certificate is public", in: cert, want: cert},
		{name: "END of another label", in: "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END EC PRIVATE KEY----- tail", want: "[REDACTED:private_key]"},
		{name: "a cut-off key before a whole one", in: "-----BEGIN EC PRIVATE KEY-----\nMHc\n(cut) then " + fakePEM + " end", want: "[REDACTED:private_key](cut) then [REDACTED:private_key] end"},
		{name: "public key is public", in: "-----BEGIN PUBLIC KEY-----\nMIIFAKE\n-----END PUBLIC KEY-----", want: "-----BEGIN PUBLIC KEY-----\nMIIFAKE\n-----END PUBLIC KEY-----"},
	})
}

func TestJWT(t *testing.T) {
	noAlg := b64(`{"typ":"JWT","kid":"x"}`) + "." + b64(`{"sub":"x"}`) + ".sig"
	testDetector(t, "jwt", []detectorCase{
		{name: "signed", in: "Bearer " + fakeJWT, want: "Bearer [REDACTED:jwt]"},
		{name: "unsecured, empty signature", in: b64(`{"alg":"none"}`) + "." + b64(`{"sub":"x"}`) + ".", want: "[REDACTED:jwt]"},
		{name: "header without alg", in: noAlg, want: noAlg},
		{name: "two segments", in: b64(`{"alg":"HS256"}`) + "." + b64(`{"sub":"x"}`), want: b64(`{"alg":"HS256"}`) + "." + b64(`{"sub":"x"}`)},
		{name: "header not JSON", in: "eyJub3QganNvbg.eyJzdWIiOiJ4In0.sig", want: "eyJub3QganNvbg.eyJzdWIiOiJ4In0.sig"},
	})
}

func TestAssignments(t *testing.T) {
	testDetector(t, "generic_secret", []detectorCase{
		{name: "env", in: "DB_PASSWORD=Xk9mQ2vL7pR4wZ\nHOST=db", want: "DB_PASSWORD=[REDACTED:generic_secret]\nHOST=db"},
		{name: "json in text", in: `{"api_key": "q8Jf3kLx92mZp0Rt"}`, want: `{"api_key": "[REDACTED:generic_secret]"}`},
		{name: "json in a json string in text", in: `{\"api_key\":\"q8Jf3kLx92mZp0Rt\"}`, want: `{\"api_key\":\"[REDACTED:generic_secret]\"}`},
		{name: "yaml", in: "client_secret: 'S3cr3t-Passw0rd!x'", want: "client_secret: '[REDACTED:generic_secret]'"},
		{name: "flag", in: "--token=f00dBABEcafe1234beef", want: "--token=[REDACTED:generic_secret]"},
		{name: "bearer header", in: "Authorization: Bearer q8Jf3kLx92mZp0Rt", want: "Authorization: Bearer [REDACTED:generic_secret]"},
		{name: "go", in: `apiKey := "q8Jf3kLx92mZp0Rt"`, want: `apiKey := "[REDACTED:generic_secret]"`},
		{name: "low entropy", in: "password=changeme", want: "password=changeme"},
		{name: "URL password", in: "DSN postgres://app:hunter22@db.example.com:5432/x", want: "DSN postgres://app:[REDACTED:generic_secret]@db.example.com:5432/x"},
		{name: "URL password without user", in: "redis://:pw@cache:6379", want: "redis://:[REDACTED:generic_secret]@cache:6379"},
		{name: "URL user without password", in: "ssh://git@example.com/r", want: "ssh://git@example.com/r"},
		{name: "URL password placeholder", in: "postgres://app:${DB_PASSWORD}@db/x", want: "postgres://app:${DB_PASSWORD}@db/x"},
		{name: "mailto is not a password", in: "mailto:a@b", want: "mailto:a@b"},
		{name: "variable", in: "password: ${DB_PASSWORD}", want: "password: ${DB_PASSWORD}"},
		{name: "placeholder", in: "token: <your-token-here>", want: "token: <your-token-here>"},
		{name: "masked", in: "password: ************", want: "password: ************"},
		{name: "not a secret's name", in: "max_tokens: 4096, session: q8Jf3kLx92mZp0Rt", want: "max_tokens: 4096, session: q8Jf3kLx92mZp0Rt"},
		{name: "name continues", in: "password_reset_url: https://example.com/reset/q8Jf3kLx92", want: "password_reset_url: https://example.com/reset/q8Jf3kLx92"},
		{name: "comparison", in: "if password == q8Jf3kLx92mZp0Rt", want: "if password == q8Jf3kLx92mZp0Rt"},
		{name: "short", in: "token=aB3$", want: "token=aB3$"},
		{name: "chained assignments", in: "token=q8Jf3kLx92mZp0Rt=x", want: "token=[REDACTED:generic_secret]=x"},
		{name: "base64 padding kept", in: "secret: q8Jf3kLx92mZp0Rt==", want: "secret: [REDACTED:generic_secret]"},
	})
	testDetector(t, "aws_secret_key", []detectorCase{
		{name: "credentials file", in: "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", want: "aws_secret_access_key = [REDACTED:aws_secret_key]"},
		{name: "env", in: "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", want: "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"},
		{name: "39 chars", in: "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE", want: "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE"},
	})
}

func TestEmail(t *testing.T) {
	testDetector(t, "email", []detectorCase{
		{name: "plain", in: "mail alice@example.com now", want: "mail [REDACTED:email] now"},
		{name: "tags and subdomains", in: "<bob.smith+news@mail.example.co.uk>", want: "<[REDACTED:email]>"},
		{name: "sentence end", in: "write to carol@example.org.", want: "write to [REDACTED:email]."},
		{name: "two", in: "a@example.com,b@example.net", want: "[REDACTED:email],[REDACTED:email]"},
		{name: "retina image", in: "icon@2x.png", want: "icon@2x.png"},
		{name: "npm scope", in: "npm i @scope/pkg", want: "npm i @scope/pkg"},
		{name: "version pin", in: "react@18.2.0", want: "react@18.2.0"},
		{name: "no dot", in: "root@localhost", want: "root@localhost"},
		{name: "decorator", in: "@property", want: "@property"},
		{name: "user in a URL", in: "https://alice@example.com/x", want: "https://[REDACTED:email]/x"},
		{name: "password in a URL is not an address", in: "https://u:pw@example.com/x", want: "https://u:pw@example.com/x"},
	})
}

func TestPhone(t *testing.T) {
	testDetector(t, "phone", []detectorCase{
		{name: "E.164", in: "call +14155550123 now", want: "call [REDACTED:phone] now"},
		{name: "E.164 grouped", in: "+1 415 555 0123", want: "[REDACTED:phone]"},
		{name: "E.164 UK", in: "+44 20 7946 0958", want: "[REDACTED:phone]"},
		{name: "E.164 with trunk zero", in: "+44 (0)20 7946 0958", want: "[REDACTED:phone]"},
		{name: "international 00", in: "0044 20 7946 0958", want: "[REDACTED:phone]"},
		{name: "US parentheses", in: "tel: (415) 555-0123.", want: "tel: [REDACTED:phone]."},
		{name: "US dashes", in: "415-555-0123", want: "[REDACTED:phone]"},
		{name: "US dots", in: "415.555.0123", want: "[REDACTED:phone]"},
		{name: "US toll free", in: "1-800-555-0199", want: "[REDACTED:phone]"},
		{name: "UK national", in: "020 7946 0958", want: "[REDACTED:phone]"},
		{name: "FR national", in: "06 12 34 56 78", want: "[REDACTED:phone]"},
		{name: "date", in: "2024-01-15", want: "2024-01-15"},
		{name: "date, day first", in: "15.01.2024 and 01-15-2024", want: "15.01.2024 and 01-15-2024"},
		{name: "IP address", in: "192.168.100.200", want: "192.168.100.200"},
		{name: "bare digits", in: "order 4155550123", want: "order 4155550123"},
		{name: "time zone", in: "2024-01-15T10:00:00+05:30", want: "2024-01-15T10:00:00+05:30"},
		{name: "version", in: "v10.15.7", want: "v10.15.7"},
		{name: "amount", in: "1,234,567.89", want: "1,234,567.89"},
		{name: "UUID", in: "123e4567-e89b-12d3-a456-426614174000", want: "123e4567-e89b-12d3-a456-426614174000"},
		{name: "ISBN", in: "978-3-16-148410-0", want: "978-3-16-148410-0"},
		{name: "longer number", in: "12-415-555-0123", want: "12-415-555-0123"},
		{name: "short international", in: "+49 30", want: "+49 30"},
		{name: "a card after it", in: "+1 415 555 0123 4111111111111111", want: "[REDACTED:phone] 4111111111111111"},
		{name: "trunk number too long", in: "030-1234-5678-9012-3456", want: "030-1234-5678-9012-3456"},
		{name: "arithmetic", in: "1+2345678901", want: "1+2345678901"},
	})
}

func TestCardNumber(t *testing.T) {
	testDetector(t, "card_number", []detectorCase{
		{name: "visa spaced", in: "card 4111 1111 1111 1111 exp", want: "card [REDACTED:card_number] exp"},
		{name: "visa dashed", in: "4111-1111-1111-1111", want: "[REDACTED:card_number]"},
		{name: "visa compact", in: "4111111111111111", want: "[REDACTED:card_number]"},
		{name: "mastercard", in: "5555555555554444", want: "[REDACTED:card_number]"},
		{name: "amex grouped", in: "3782 822463 10005", want: "[REDACTED:card_number]"},
		{name: "amex compact", in: "378282246310005", want: "[REDACTED:card_number]"},
		{name: "Luhn fails", in: "4111 1111 1111 1112", want: "4111 1111 1111 1112"},
		{name: "not a network digit", in: "1234567812345670", want: "1234567812345670"},
		{name: "one digit", in: "4444 4444 4444 4444", want: "4444 4444 4444 4444"},
		{name: "timestamp ms", in: "1700000000000", want: "1700000000000"},
		{name: "too long", in: "4111-1111-1111-1111-1111", want: "4111-1111-1111-1111-1111"},
		{name: "another number after a space", in: "4111 1111 1111 1111 12/28", want: "[REDACTED:card_number] 12/28"},
		{name: "odd grouping", in: "41 1111 1111 1111 11", want: "41 1111 1111 1111 11"},
		{name: "mixed separators", in: "4111 1111-1111 1111", want: "4111 1111-1111 1111"},
		{name: "decimal", in: "0.4111111111111111", want: "0.4111111111111111"},
	})
}

func TestIBAN(t *testing.T) {
	testDetector(t, "iban", []detectorCase{
		{name: "DE grouped", in: "IBAN DE89 3704 0044 0532 0130 00.", want: "IBAN [REDACTED:iban]."},
		{name: "DE compact", in: "DE89370400440532013000", want: "[REDACTED:iban]"},
		{name: "GB letters", in: "GB82 WEST 1234 5698 7654 32", want: "[REDACTED:iban]"},
		{name: "FR last group of 3", in: "FR14 2004 1010 0505 0001 3M02 606", want: "[REDACTED:iban]"},
		{name: "check digits wrong", in: "DE89 3704 0044 0532 0130 01", want: "DE89 3704 0044 0532 0130 01"},
		{name: "unknown country", in: "XX89370400440532013000", want: "XX89370400440532013000"},
		{name: "too short", in: "DE8937040044053201300", want: "DE8937040044053201300"},
		{name: "too long", in: "DE893704004405320130001", want: "DE893704004405320130001"},
	})
}

func TestCustom(t *testing.T) {
	r, err := New([]byte(`{"detectors":[],"custom":[
		{"name":"employee_id","pattern":"EMP-[0-9]{6}"},
		{"name":"session","pattern":"session=([A-Za-z0-9]+)"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, n := redactString(t, r, "EMP-123456 logged in, session=abc123; alice@example.com")
	want := "[REDACTED:employee_id] logged in, session=[REDACTED:session]; alice@example.com"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if diff := cmp.Diff(Counts{"employee_id": 1, "session": 1}, n); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func TestMarkersAreNotRedactedAgain(t *testing.T) {
	r, err := New([]byte(`{"detectors":[],"custom":[{"name":"caps","pattern":"[A-Z]{8}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, n := redactString(t, r, "[REDACTED:email] ABCDEFGH [REDACTED:x")
	if want := "[REDACTED:email] [REDACTED:caps] [[REDACTED:caps]:x"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if n["caps"] != 2 {
		t.Errorf("counts %v", n)
	}
}

func TestJSONDocuments(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want string
		counts         Counts
	}{
		{
			name:   "echo result",
			in:     `{"content":[{"type":"text","text":"Echo: AKIAIOSFODNN7EXAMPLE alice@example.com"}],"isError":false}`,
			want:   `{"content":[{"type":"text","text":"Echo: [REDACTED:aws_access_key] [REDACTED:email]"}],"isError":false}`,
			counts: Counts{"aws_access_key": 1, "email": 1},
		},
		{
			name:   "keys are not redacted, escapes decoded",
			in:     `{"alice@example.com": "x\u0041KIAIOSFODNN7EXAMPLE", "n": 1}`,
			want:   `{"alice@example.com": "x\u0041KIAIOSFODNN7EXAMPLE", "n": 1}`,
			counts: nil,
		},
		{
			name:   "escaped value",
			in:     "[\"line\\nAKIAIOSFODNN7EXAMPLE\\t\\u00e9\", true, null, 1.5e3]",
			want:   "[\"line\\n[REDACTED:aws_access_key]\\té\", true, null, 1.5e3]",
			counts: Counts{"aws_access_key": 1},
		},
		{
			name:   "structured content and blanks kept",
			in:     "{ \"structuredContent\" : { \"user\" : { \"email\" : \"bob@example.org\" } } }",
			want:   "{ \"structuredContent\" : { \"user\" : { \"email\" : \"[REDACTED:email]\" } } }",
			counts: Counts{"email": 1},
		},
		{name: "scalar", in: `42`, want: `42`},
		{
			name:   "member named as a secret",
			in:     `{"db":{"host":"db1","password":"q8Jf3kLx92mZp0Rt","aws_secret_access_key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}`,
			want:   `{"db":{"host":"db1","password":"[REDACTED:generic_secret]","aws_secret_access_key":"[REDACTED:aws_secret_key]"}}`,
			counts: Counts{"generic_secret": 1, "aws_secret_key": 1},
		},
		{
			name: "member named as a secret, placeholder or low entropy",
			in:   `{"password":"${DB_PASSWORD}","token":"changeme","api_key":null,"tokens":"q8Jf3kLx92mZp0Rt"}`,
			want: `{"password":"${DB_PASSWORD}","token":"changeme","api_key":null,"tokens":"q8Jf3kLx92mZp0Rt"}`,
		},
		{
			name: "a secret's name does not reach an array or the next member",
			in:   `{"token":["q8Jf3kLx92mZp0Rt"],"secret":1,"x":"q8Jf3kLx92mZp0Rt"}`,
			want: `{"token":["q8Jf3kLx92mZp0Rt"],"secret":1,"x":"q8Jf3kLx92mZp0Rt"}`,
		},
		{
			name: "base64 blob is data",
			in:   `{"blob":"` + strings.Repeat("AAAA", 30) + `+AKIAIOSFODNN7EXAMPLE+4111111111111111/AAA=="}`,
			want: `{"blob":"` + strings.Repeat("AAAA", 30) + `+AKIAIOSFODNN7EXAMPLE+4111111111111111/AAA=="}`,
		},
		{
			name:   "short base64 is text",
			in:     `{"v":"+AKIAIOSFODNN7EXAMPLE+AA=="}`,
			want:   `{"v":"+[REDACTED:aws_access_key]+AA=="}`,
			counts: Counts{"aws_access_key": 1},
		},
		{
			name:   "text with a space is not base64",
			in:     `{"v":"` + strings.Repeat("AAAA", 30) + ` AKIAIOSFODNN7EXAMPLE"}`,
			want:   `{"v":"` + strings.Repeat("AAAA", 30) + ` [REDACTED:aws_access_key]"}`,
			counts: Counts{"aws_access_key": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, n, err := r.JSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
			if diff := cmp.Diff(tc.counts, n); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJSONReturnsRawWhenClean(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte(`{"content":[{"type":"text","text":"nothing to see on 2024-01-15"}]}`)
	out, n, err := r.JSON(raw)
	if err != nil || n != nil || &out[0] != &raw[0] || len(out) != len(raw) {
		t.Errorf("JSON = %s, %v, %v; want raw itself, nil, nil", out, n, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = r.JSON(raw) }); allocs != 0 {
		t.Errorf("JSON allocates %v times on a clean document, want 0", allocs)
	}
}

func TestJSONRejectsMalformed(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{``, `{`, `{"a":}`, `"unterminated`, `{"a":1} x`, `[1,]`} {
		if _, _, err := r.JSON([]byte(in)); err == nil {
			t.Errorf("JSON(%q): no error", in)
		}
	}
}

func TestJSONIsIdempotent(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal("x " + fakeGitHub + " " + fakeJWT + " " + fakePEM + " alice@example.com +1 415 555 0123 4111111111111111 DE89370400440532013000 password=Xk9mQ2vL7pR4wZ")
	once, n, err := r.JSON(in)
	if err != nil || len(n) != 8 {
		t.Fatalf("first pass: %s, %v, %v", once, n, err)
	}
	twice, n2, err := r.JSON(once)
	if err != nil || n2 != nil || string(twice) != string(once) {
		t.Errorf("second pass changed %s into %s (%v, %v)", once, twice, n2, err)
	}
}

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		kinds        []string
		arguments    bool
		err          []string // each must appear in the error
	}{
		{name: "nil is every detector", config: ``, kinds: builtinKinds[:]},
		{name: "null", config: `null`, kinds: builtinKinds[:]},
		{name: "groups", config: `{"detectors":["pii"]}`, kinds: []string{"email", "phone", "card_number", "iban"}},
		{name: "kinds and arguments", config: `{"detectors":["jwt","email"],"arguments":true}`, kinds: []string{"jwt", "email"}, arguments: true},
		{name: "custom only", config: `{"detectors":[],"custom":[{"name":"ticket","pattern":"T-[0-9]+"}]}`, kinds: []string{"ticket"}},
		{name: "unknown key", config: `{"detector":["pii"],"argument":true}`, err: []string{"unknown key argument, detector"}},
		{name: "unknown detector", config: `{"detectors":["secrets","emails"]}`, err: []string{`detectors[1]: unknown detector "emails"`}},
		{name: "custom errors", config: `{"custom":[{"name":"Bad Name","pattern":"("},{"name":"email","pattern":"x*"},{"pattern":"a","flags":"i"}]}`,
			err: []string{`custom[0].name: "Bad Name"`, "custom[0].pattern: error parsing regexp", `custom[1].name: "email" is a built-in`,
				"custom[1].pattern: \"x*\" matches the empty string", "custom[2].name: missing", "unknown key custom[2].flags"}},
		{name: "wrong type", config: `{"arguments":"yes"}`, err: []string{"arguments: want bool"}},
		{name: "not an object", config: `[]`, err: []string{"not a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New([]byte(tc.config))
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("New: no error, want %q", tc.err)
				}
				for _, want := range tc.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q\nlacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.kinds, r.Kinds()); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
			if r.Arguments() != tc.arguments {
				t.Errorf("Arguments() = %v", r.Arguments())
			}
		})
	}
}
