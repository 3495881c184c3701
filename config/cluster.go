package config

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// minClusterSecret is the shortest cluster secret accepted, in bytes.
const minClusterSecret = 32

// Cluster turns on cluster mode (key "gateway.cluster"): several replicas behind a plain
// round-robin load balancer, each serving any request (docs/architecture.md, Cluster mode).
// Absent (no secret): a single instance, and nothing of it costs anything. Applies at restart.
type Cluster struct {
	// Secret (key "secret") is the cluster secret, at least 32 bytes, the same on every
	// replica; every key is derived from it. Exactly one of Secret and SecretFile.
	Secret string
	// SecretFile (key "secretFile") is a file holding the secret (a Kubernetes Secret
	// volume); one trailing newline is ignored.
	SecretFile string
	// PreviousSecrets (key "previousSecrets") are still accepted, never issued: rotation.
	PreviousSecrets []string
	// Advertise (key "advertise") is how the other replicas reach this one, host:port
	// (the pod IP and port). Required.
	Advertise string
	// Peers (key "peers") are the other replicas' advertised addresses, when known
	// statically; used to choose a principal's home replica.
	Peers []string
	// PeersDNS (key "peersDNS") is host:port; every address the host resolves to, with the
	// port, is a replica (a Kubernetes headless Service: its ready pods). Resolved every 5s.
	PeersDNS string
	// Store (key "store") is the shared store, redis://… or rediss://…; empty: none.
	Store string
	// MaxSessionAge (key "maxSessionAge") is how long a session id is accepted after it was
	// issued; default 24h. An older session gets 404 and the client starts a new one.
	MaxSessionAge time.Duration
}

// Enabled reports whether cluster mode is on: a secret is configured.
func (c *Cluster) Enabled() bool { return c.Secret != "" || c.SecretFile != "" }

// clusterFields are the keys of gateway.cluster.
func clusterFields(c *Cluster) []field {
	return []field{
		{name: "secret", ptr: &c.Secret},
		{name: "secretFile", ptr: &c.SecretFile},
		{name: "previousSecrets", ptr: &c.PreviousSecrets},
		{name: "advertise", ptr: &c.Advertise},
		{name: "peers", ptr: &c.Peers},
		{name: "peersDNS", ptr: &c.PeersDNS},
		{name: "store", ptr: &c.Store},
		{name: "maxSessionAge", ptr: &c.MaxSessionAge},
	}
}

// Secrets returns the issuing secret (read from SecretFile when set) and the previous ones.
func (c *Cluster) Secrets() (secret []byte, previous [][]byte, err error) {
	secret = []byte(c.Secret)
	if c.SecretFile != "" {
		b, err := readSecretBytes(c.SecretFile)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway.cluster.secretFile: %w", err)
		}
		secret = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	}
	for _, p := range c.PreviousSecrets {
		previous = append(previous, []byte(p))
	}
	return secret, previous, nil
}

// cluster validates gateway.cluster.
func (v *validator) cluster(c *Cluster) {
	const key = "gateway.cluster"
	if !c.Enabled() {
		if c.Advertise != "" || len(c.Peers) > 0 || c.PeersDNS != "" || c.Store != "" || len(c.PreviousSecrets) > 0 {
			v.add(key+".secret", "cluster mode needs a secret (secret or secretFile)")
		}
		return
	}
	switch {
	case c.Secret != "" && c.SecretFile != "":
		v.add(key, "set secret or secretFile, not both")
	case c.SecretFile != "":
		if v.checkFile(key+".secretFile", c.SecretFile) {
			if s, _, err := c.Secrets(); err != nil {
				v.add(key+".secretFile", err.Error())
			} else if len(s) < minClusterSecret {
				v.add(key+".secretFile", fmt.Sprintf("the secret must be at least %d bytes", minClusterSecret))
			}
		}
	case len(c.Secret) < minClusterSecret:
		v.add(key+".secret", fmt.Sprintf("must be at least %d bytes", minClusterSecret))
	}
	for i, p := range c.PreviousSecrets {
		if len(p) < minClusterSecret {
			v.add(fmt.Sprintf("%s.previousSecrets[%d]", key, i), fmt.Sprintf("must be at least %d bytes", minClusterSecret))
		}
	}
	if c.Advertise == "" {
		v.add(key+".advertise", "required in cluster mode: how the other replicas reach this one, host:port")
	} else if host, ok := v.hostPort(key+".advertise", c.Advertise, "10.1.2.3:8080"); ok && (host == "" || strings.HasSuffix(c.Advertise, ":0")) {
		v.add(key+".advertise", "must name a host and a port other replicas can reach")
	}
	for i, p := range c.Peers {
		v.hostPort(fmt.Sprintf("%s.peers[%d]", key, i), p, "10.1.2.4:8080")
	}
	if c.PeersDNS != "" {
		v.hostPort(key+".peersDNS", c.PeersDNS, "manifold-headless.default.svc.cluster.local:8080")
	}
	if c.Store != "" {
		if u, err := url.Parse(c.Store); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			v.add(key+".store", "must be redis://host:port/db or rediss://…: a store every replica shares (a file-backed store is per replica)")
		}
	}
	if c.MaxSessionAge < 0 {
		v.add(key+".maxSessionAge", "must not be negative")
	}
}

// fileStores refuses, in cluster mode, the sections that keep state in a
// file of their own: each replica would keep its own copy, and a principal's
// tokens or a server's pins would depend on the replica a request lands on.
func (v *validator) fileStores(g *Gateway) {
	if !g.Cluster.Enabled() {
		return
	}
	const msg = "a file-backed store is per replica: in cluster mode (gateway.cluster) set store: cluster instead of file, with gateway.cluster.store, so that every replica shares it"
	if g.TokenStore.File != "" {
		v.add("gateway.tokenStore.file", msg)
	}
	if g.Pinning.File != "" {
		v.add("gateway.pinning.file", msg)
	}
}
