package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUpstreamAuthDecodes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := `
auth: {jwt: {issuer: https://idp.test, secret: "0123456789abcdef0123456789abcdef", audience: [https://gw.test]}}
gateway:
  tokenStore: {file: ` + filepath.Join(dir, "tokens") + `, secret: "0123456789abcdef0123456789abcdef!"}
mcpServers:
  machine:
    url: https://a.test/mcp
    auth: {type: client_credentials, tokenURL: "http://127.0.0.1:9/token", clientID: gw,
           privateKeyFile: ` + key + `, scopes: [read, write], resource: https://a.test/mcp}
  user:
    url: https://b.test/mcp
    auth: {type: token-exchange, tokenURL: https://as.test/token, clientID: gw, clientSecret: s3cret,
           tokenEndpointAuth: client_secret_post, audience: https://b.test}
`
	c, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]UpstreamAuth{
		"machine": {Type: UpstreamAuthClientCredentials, TokenURL: "http://127.0.0.1:9/token", ClientID: "gw",
			PrivateKeyFile: key, Scopes: []string{"read", "write"}, Resource: "https://a.test/mcp"},
		"user": {Type: UpstreamAuthTokenExchange, TokenURL: "https://as.test/token", ClientID: "gw", ClientSecret: "s3cret",
			TokenEndpointAuth: ClientSecretPost, Audience: "https://b.test"},
	}
	got := map[string]UpstreamAuth{"machine": c.Servers["machine"].Auth, "user": c.Servers["user"].Auth}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
	if c.Servers["user"].ListsMode() != ListsPerClient || c.Servers["machine"].ListsMode() != ListsShared || !c.Servers["user"].Auth.PerPrincipal() || c.Servers["machine"].Auth.PerPrincipal() {
		t.Errorf("lists/per-principal wrong: %+v", c.Servers["user"])
	}
	if c.Gateway.TokenStore.File == "" {
		t.Error("tokenStore.file not decoded")
	}
}

func TestUpstreamAuthValidation(t *testing.T) {
	const jwt = `auth: {jwt: {issuer: https://idp.test, secret: "0123456789abcdef0123456789abcdef", audience: [https://gw.test]}}` + "\n"
	tests := []struct {
		name string
		doc  string
		want []wantErr
	}{
		{
			name: "an unknown type",
			doc:  "mcpServers: {a: {url: https://a.test/mcp, auth: {type: magic}}}\n",
			want: []wantErr{{"m.yaml", "mcpServers.a.auth.type", "must be oauth, client_credentials or token-exchange"}},
		},
		{
			name: "oauth discovers its endpoints: token-exchange keys and a bad metadata URL are refused",
			doc: "mcpServers: {a: {url: https://a.test/mcp, session: shared, lists: shared, auth: {type: oauth, tokenURL: https://as.test/t, clientSecret: s, " +
				"clientMetadataURL: http://gw.test/client.json}}}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.auth.clientID", "is required with a client secret"},
				{"m.yaml", "mcpServers.a.auth.clientMetadataURL", "must be an https URL with a path"},
				{"m.yaml", "mcpServers.a.auth.tokenURL", "not used by oauth"},
				{"m.yaml", "mcpServers.a.lists", "lists must be per-client"},
				{"m.yaml", "mcpServers.a.session", "needs session: per-client"},
			},
		},

		{
			name: "an oauth server cannot be required: it has no connection of its own before users sign in",
			doc:  "mcpServers: {a: {url: https://a.test/mcp, required: true, auth: {type: oauth}}, b: {url: https://b.test/mcp, required: true}}\n",
			want: []wantErr{{"m.yaml", "mcpServers.a.required", "no connection of its own for readiness to wait for"}},
		},
		{
			name: "client credentials need a token URL, a client and a secret",
			doc:  "mcpServers: {a: {url: https://a.test/mcp, auth: {type: client_credentials, tokenURL: http://as.test/token}}}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.auth", "needs clientSecret, clientSecretFile or privateKeyFile"},
				{"m.yaml", "mcpServers.a.auth.clientID", "is required"},
				{"m.yaml", "mcpServers.a.auth.tokenURL", "https URL (or http on a loopback address)"},
			},
		},
		{
			name: "token exchange needs auth.jwt, an audience and per-client sessions",
			doc: "mcpServers: {a: {url: https://a.test/mcp, session: shared, auth: {type: token-exchange, tokenURL: https://as.test/t, " +
				"clientID: gw, clientSecret: s, tokenEndpointAuth: private_key_jwt}}}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.auth.audience", "needs the upstream's audience"},
				{"m.yaml", "mcpServers.a.auth.tokenEndpointAuth", "private_key_jwt needs privateKeyFile"},
				{"m.yaml", "mcpServers.a.auth.type", "needs auth.jwt"},
				{"m.yaml", "mcpServers.a.session", "needs session: per-client"},
			},
		},
		{
			name: "a stdio server takes no auth, and lists must be known",
			doc:  jwt + "mcpServers: {a: {command: x, lists: mine, auth: {type: client_credentials, tokenURL: https://as.test/t, clientID: gw, clientSecret: s, scopes: [\"a b\"]}}}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.auth", "only valid for http and sse servers"},
				{"m.yaml", "mcpServers.a.auth.scopes[0]", "non-empty scope token"},
				{"m.yaml", "mcpServers.a.lists", "must be shared or per-client"},
			},
		},
		{
			name: "per-client lists need per-client sessions",
			doc:  "mcpServers: {a: {url: https://a.test/mcp, lists: per-client, session: shared}, b: {command: x, lists: per-client, session: per-client}}\n",
			want: []wantErr{{"m.yaml", "mcpServers.a.lists", "need session: per-client"}},
		},
		{
			name: "the token store needs a long enough secret",
			doc:  "gateway: {tokenStore: {file: /tmp/x, secret: short}}\n",
			want: []wantErr{{"m.yaml", "gateway.tokenStore.secret", "at least 32 bytes"}},
		},
		{
			name: "the token store needs a secret",
			doc:  "gateway: {tokenStore: {file: /tmp/x}}\n",
			want: []wantErr{{"m.yaml", "gateway.tokenStore.secret", "needs secret or secretFile"}},
		},
		{
			name: "an unknown auth key is an error",
			doc:  "mcpServers: {a: {url: https://a.test/mcp, auth: {type: client_credentials, tokenURL: https://as.test/t, clientID: gw, clientSecret: s, tokenUrl: x}}}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.auth.tokenUrl", `unknown key (did you mean "tokenURL"?)`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), FormatYAML, "m.yaml", testOpts(nil))
			checkErrors(t, err, tt.want)
		})
	}
}
