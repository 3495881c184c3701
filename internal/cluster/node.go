package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Defaults of Options.
const (
	DefaultRefresh  = 5 * time.Second
	DefaultMaxAge   = 24 * time.Hour
	defaultDial     = 2 * time.Second
	peerDownBackoff = 10 * time.Second
)

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Options configures a Node. The zero value of each field is its default.
type Options struct {
	// Logger; nil = no-op.
	Logger *zap.Logger
	// Peers are the other replicas' advertised addresses (host:port),
	// known statically.
	Peers []string
	// PeersDNS, host:port, names the replicas through DNS: every address
	// the host resolves to, with the port (a Kubernetes headless Service,
	// which lists the ready pods). Resolved at Run and every Refresh.
	PeersDNS string
	// Refresh is how often PeersDNS is resolved again; default 5s.
	Refresh time.Duration
	// Resolver resolves PeersDNS; default net.DefaultResolver.
	Resolver Resolver
	// TLS: peers are reached with https (the gateway serves TLS).
	TLS bool
	// MaxAge is how long a token opens after it was issued; default 24h.
	MaxAge time.Duration
	// Transport reaches the peers; default a dedicated http.Transport.
	Transport http.RoundTripper
}

// Node is this replica's view of the cluster: its keys, its advertised
// address and boot id, the live peers, and the reverse proxy to them. Safe
// for concurrent use; Run keeps the peers current, Close ends the forwards.
type Node struct {
	keys   atomic.Pointer[Keys]
	self   string
	boot   uint64
	opts   Options
	log    *zap.Logger
	proxy  *httputil.ReverseProxy
	peers  atomic.Pointer[[]string] // sorted, self included
	downMu sync.Mutex
	down   map[string]time.Time // peers a forward could not reach, until when
	closed context.Context      // done at Close: forwards end
	cancel context.CancelFunc   // ends closed
}

// NewNode returns the node of the replica advertised as self (host:port).
func NewNode(keys *Keys, self string, opts *Options) (*Node, error) {
	if keys == nil {
		return nil, errors.New("cluster: nil keys")
	}
	if _, _, err := net.SplitHostPort(self); err != nil {
		return nil, fmt.Errorf("cluster: advertise %q: %w", self, err)
	}
	n := &Node{self: self, down: map[string]time.Time{}}
	n.closed, n.cancel = context.WithCancel(context.Background())
	n.keys.Store(keys)
	if opts != nil {
		n.opts = *opts
	}
	if n.opts.Logger == nil {
		n.opts.Logger = zap.NewNop()
	}
	n.log = n.opts.Logger
	if n.opts.Refresh <= 0 {
		n.opts.Refresh = DefaultRefresh
	}
	if n.opts.MaxAge <= 0 {
		n.opts.MaxAge = DefaultMaxAge
	}
	if n.opts.Resolver == nil {
		n.opts.Resolver = net.DefaultResolver
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("cluster: boot id: %w", err)
	}
	n.boot = binary.BigEndian.Uint64(b[:])
	n.setPeers(nil)
	n.proxy = n.newProxy()
	return n, nil
}

// Self is this replica's advertised address.
func (n *Node) Self() string { return n.self }

// Keys are the node's keys.
func (n *Node) Keys() *Keys { return n.keys.Load() }

// SetKeys replaces the node's keys (a rotated secret, at reload): tokens
// are issued and checked under them from the next request on.
func (n *Node) SetKeys(k *Keys) { n.keys.Store(k) }

// Issue seals a token of kind for principal, owned by this replica, with
// local as what it needs to find it.
func (n *Node) Issue(kind Kind, principal Principal, local string) (string, error) {
	return n.Keys().Seal(&Token{Kind: kind, Owner: n.self, Boot: n.boot, Expires: time.Now().Add(n.opts.MaxAge), Principal: principal, Local: local})
}

// Open opens token s (see Keys.Open).
func (n *Node) Open(s string) (Token, error) { return n.Keys().Open(s, time.Now()) }

// Mine reports whether t names something of this very process (this
// address and boot).
func (n *Node) Mine(t *Token) bool { return t.Owner == n.self && t.Boot == n.boot }

// Owns reports whether owner and boot name this process.
func (n *Node) Owns(owner string, boot uint64) bool { return owner == n.self && boot == n.boot }

// Boot is this process's boot id.
func (n *Node) Boot() uint64 { return n.boot }

// Hop says whether r was forwarded by a replica (see Keys.Hop).
func (n *Node) Hop(r *http.Request) HopState { return n.Keys().Hop(r, time.Now()) }

// Peers are the replicas known live, sorted, this one included.
func (n *Node) Peers() []string { return *n.peers.Load() }

// setPeers publishes the static peers, found (DNS), and self.
func (n *Node) setPeers(found []string) {
	all := slices.Concat([]string{n.self}, n.opts.Peers, found)
	slices.Sort(all)
	all = slices.Compact(all)
	n.peers.Store(&all)
}

// Run resolves PeersDNS now and every Refresh until ctx is done. Without
// PeersDNS it returns at once.
func (n *Node) Run(ctx context.Context) {
	if n.opts.PeersDNS == "" {
		return
	}
	host, port, err := net.SplitHostPort(n.opts.PeersDNS)
	if err != nil {
		n.log.Error("cluster peers DNS name", zap.Error(err))
		return
	}
	t := time.NewTicker(n.opts.Refresh)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, n.opts.Refresh)
		addrs, err := n.opts.Resolver.LookupHost(lctx, host)
		cancel()
		if err != nil {
			// Keep the last answer: a DNS hiccup must not move every home.
			n.log.Warn("resolving cluster peers", zap.String("name", host), zap.Error(err))
		} else {
			found := make([]string, len(addrs))
			for i, a := range addrs {
				found[i] = net.JoinHostPort(a, port)
			}
			n.setPeers(found)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Home returns the live replica that owns key (a principal's per-client
// upstream sessions) by rendezvous hashing: the peer with the highest
// hash of (key, peer). Every replica with the same peer list picks the
// same one, and a replica leaving moves only the keys it owned.
func (n *Node) Home(key string) string {
	best, bestScore := n.self, uint64(0)
	now := time.Now()
	for _, p := range n.Peers() {
		if p != n.self && n.isDown(p, now) {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(p))
		if s := mix(h.Sum64()); s > bestScore || (s == bestScore && p < best) {
			best, bestScore = p, s
		}
	}
	return best
}

// mix is splitmix64's finalizer: FNV's low bits alone spread badly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (n *Node) isDown(p string, now time.Time) bool {
	n.downMu.Lock()
	defer n.downMu.Unlock()
	until, ok := n.down[p]
	if ok && now.After(until) {
		delete(n.down, p)
		return false
	}
	return ok
}

func (n *Node) markDown(p string) {
	n.downMu.Lock()
	n.down[p] = time.Now().Add(peerDownBackoff)
	n.downMu.Unlock()
}
