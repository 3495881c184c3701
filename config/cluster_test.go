package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClusterConfig: gateway.cluster decodes, validates every key, reads a
// secret file, and takes environment overrides like the other gateway keys.
func TestClusterConfig(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	shortFile := filepath.Join(dir, "short")
	os.WriteFile(secretFile, []byte("file-secret-0123456789abcdef0123456789\n"), 0o600)
	os.WriteFile(shortFile, []byte("short\n"), 0o600)
	const secret = "cluster-secret-0123456789abcdef01234"
	for _, c := range []struct {
		name    string
		cluster string
		environ []string
		want    []wantErr
		check   func(t *testing.T, c *Cluster)
	}{
		{name: "valid", cluster: `{secret: ` + secret + `, previousSecrets: [old-secret-0123456789abcdef012345678], advertise: "10.1.2.3:8080", peers: ["10.1.2.4:8080"], peersDNS: "manifold-headless:8080", store: "redis://redis:6379/0", maxSessionAge: 1h}`,
			check: func(t *testing.T, c *Cluster) {
				if !c.Enabled() || c.Advertise != "10.1.2.3:8080" || len(c.Peers) != 1 || c.Store != "redis://redis:6379/0" {
					t.Errorf("decoded %+v", c)
				}
			}},
		{name: "secret file", cluster: `{secretFile: ` + secretFile + `, advertise: "10.1.2.3:8080"}`,
			check: func(t *testing.T, c *Cluster) {
				if s, _, err := c.Secrets(); err != nil || string(s) != "file-secret-0123456789abcdef0123456789" {
					t.Errorf("Secrets() = %q, %v", s, err)
				}
			}},
		{name: "environment override", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080"}`,
			environ: []string{"MANIFOLD_GATEWAY__CLUSTER__ADVERTISE=10.9.9.9:8080"},
			check: func(t *testing.T, c *Cluster) {
				if c.Advertise != "10.9.9.9:8080" {
					t.Errorf("advertise %q, want the override", c.Advertise)
				}
			}},
		{name: "short secret and previous", cluster: `{secret: short, previousSecrets: [tiny], advertise: "10.1.2.3:8080"}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.previousSecrets[0]", "at least 32 bytes"},
			{"m.yaml", "gateway.cluster.secret", "at least 32 bytes"},
		}},
		{name: "short secret file", cluster: `{secretFile: ` + shortFile + `, advertise: "10.1.2.3:8080"}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.secretFile", "at least 32 bytes"},
		}},
		{name: "both secrets", cluster: `{secret: ` + secret + `, secretFile: ` + secretFile + `, advertise: "10.1.2.3:8080"}`, want: []wantErr{
			{"m.yaml", "gateway.cluster", "not both"},
		}},
		{name: "no advertise", cluster: `{secret: ` + secret + `}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.advertise", "required in cluster mode"},
		}},
		{name: "advertise port 0", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:0"}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.advertise", "must name a host and a port"},
		}},
		{name: "a file-backed store", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080", store: /var/lib/manifold/store.json}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.store", "a file-backed store is per replica"},
		}},
		{name: "bad peers", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080", peers: [nope], peersDNS: nope}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.peersDNS", "must be host:port"},
			{"m.yaml", "gateway.cluster.peers[0]", "must be host:port"},
		}},
		{name: "settings without a secret", cluster: `{advertise: "10.1.2.3:8080"}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.secret", "needs a secret"},
		}},
		{name: "file-backed token store and pins", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080"}
  tokenStore: {file: /var/lib/manifold/tokens, secret: token-store-secret-0123456789abcdef}
  pinning: {file: /var/lib/manifold/pins.json}`, want: []wantErr{
			{"m.yaml", "gateway.pinning.file", "a file-backed store is per replica"},
			{"m.yaml", "gateway.tokenStore.file", "a file-backed store is per replica"},
		}},
		{name: "token store and pins in the shared store", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080", store: "redis://redis:6379/0"}
  tokenStore: {store: cluster, secret: token-store-secret-0123456789abcdef}
  pinning: {store: cluster, mode: block}`,
			check: func(t *testing.T, c *Cluster) {
				if c.Store == "" {
					t.Errorf("decoded %+v", c)
				}
			}},
		{name: "shared-store sections without a shared store", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080"}
  tokenStore: {store: cluster, secret: token-store-secret-0123456789abcdef}
  pinning: {store: cluster}`, want: []wantErr{
			{"m.yaml", "gateway.pinning.store", "needs cluster mode with a shared store"},
			{"m.yaml", "gateway.tokenStore.store", "needs cluster mode with a shared store"},
		}},
		{name: "shared token store without its secret, store and file, another store", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080", store: "redis://redis:6379/0"}
  tokenStore: {store: cluster}
  pinning: {store: redis}`, want: []wantErr{
			{"m.yaml", "gateway.pinning.store", "must be cluster"},
			{"m.yaml", "gateway.tokenStore.secret", "needs secret or secretFile"},
		}},
		{name: "typo", cluster: `{secret: ` + secret + `, advertise: "10.1.2.3:8080", advertize: x}`, want: []wantErr{
			{"m.yaml", "gateway.cluster.advertize", "unknown key"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			environ := c.environ
			if environ == nil {
				environ = []string{}
			}
			cfg, err := Parse([]byte("gateway:\n  cluster: "+c.cluster+"\n"), "yaml", "m.yaml", &LoadOptions{Environ: environ})
			if c.want != nil {
				checkErrors(t, err, c.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, &cfg.Gateway.Cluster)
		})
	}
}
