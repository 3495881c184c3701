package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/policy"
	"go.uber.org/zap"
)

// Cluster mode (docs/architecture.md, Cluster mode): with gateway.cluster
// set, what a replica holds in memory is named by a token every replica
// can open, and a request that lands on another replica is forwarded to
// the owner. Without it, g.cluster is nil and every hook below is one nil
// check.
//
//   - streamable sessions: the Mcp-Session-Id is a cluster.Token
//     (clusterSession, on every request of a session, in Gateway.session);
//   - legacy SSE: the session in the endpoint URL is one (sseTokens, and
//     clusterSSE on each POST);
//   - 2026-07-28: a retry whose requestState names another replica goes
//     there, and a call to a per-client server goes to the principal's home
//     replica (clusterStateless).
//
// Every refusal is a 404 (a session that does not exist), logged with the
// reason; the token's contents never are.

const keyOwner = "owner"

// newClusterNode builds the cluster node of c, or nil when cluster mode is
// off. Keys are derived here, once.
func newClusterNode(g *config.Gateway, log *zap.Logger) (*cluster.Node, error) {
	c := &g.Cluster
	if !c.Enabled() {
		return nil, nil
	}
	secret, previous, err := c.Secrets()
	if err != nil {
		return nil, err
	}
	keys, err := cluster.NewKeys(secret, previous)
	if err != nil {
		return nil, fmt.Errorf("gateway.cluster: %w", err)
	}
	return cluster.NewNode(keys, c.Advertise, &cluster.Options{
		Logger:   log.Named("cluster"),
		Peers:    c.Peers,
		PeersDNS: c.PeersDNS,
		TLS:      g.TLS.CertFile != "",
		MaxAge:   c.MaxSessionAge,
	})
}

// principalOf is the token principal of r's caller: who opened a session,
// as the session table binds it (sessionOwner), "local" while auth is off.
func principalOf(r *http.Request) (string, cluster.Principal) {
	owner := "local"
	if id, _ := r.Context().Value(identityCtxKey{}).(*authn.Identity); id != nil {
		owner = sessionOwner(id)
	}
	return owner, cluster.PrincipalOf(owner)
}

// newSessionID is the id of a streamable session r opens: in cluster mode
// a token naming this replica, else random.
func (g *Gateway) newSessionID(r *http.Request) (string, error) {
	_, p := principalOf(r)
	return g.cluster.Issue(cluster.KindSession, p, "")
}

// clusterOpen opens token s for r: it must open under a cluster key, be
// of kind, and name r's principal. Otherwise it answers 404 itself, logs
// why, and reports false.
func (g *Gateway) clusterOpen(w http.ResponseWriter, r *http.Request, s string, kind cluster.Kind) (cluster.Token, bool) {
	t, err := g.cluster.Open(s)
	if err == nil && t.Kind != kind {
		err = cluster.ErrForged
	}
	if err == nil {
		if _, p := principalOf(r); p != t.Principal {
			err = errOtherPrincipal
		}
	}
	if err != nil {
		g.log.Warn("request refused: session id", zap.String(keyAddr, r.RemoteAddr), zap.String(keyReason, err.Error()))
		http.Error(w, "session not found", http.StatusNotFound)
		return t, false
	}
	return t, true
}

// errOtherPrincipal: a token of another principal.
var errOtherPrincipal = errors.New("session of another principal")

// clusterRoute serves r when token t names another process: forwarded
// to its owner, or 404 when the owner is gone, restarted (another boot
// id), or r was forwarded already. It reports whether r is this process's
// to serve.
func (g *Gateway) clusterRoute(w http.ResponseWriter, r *http.Request, t *cluster.Token) bool {
	if !g.clusterHop(w, r) {
		return false
	}
	if g.cluster.Mine(t) {
		return true
	}
	if t.Owner == g.cluster.Self() || r.Header.Get(cluster.HopHeader) != "" {
		// Restarted here, or forwarded here by a replica that took this one
		// for the owner: never forwarded twice.
		g.log.Info("session of a process gone", zap.String(keyOwner, t.Owner), zap.Bool("forwarded", r.Header.Get(cluster.HopHeader) != ""))
		sessionGone(w)
		return false
	}
	g.cluster.Forward(w, r, t.Owner, sessionGone)
	return false
}

// clusterHop refuses (403, logged) a request whose hop header no cluster
// key made for it.
func (g *Gateway) clusterHop(w http.ResponseWriter, r *http.Request) bool {
	if g.cluster.Hop(r) == cluster.HopInvalid {
		g.log.Warn("request refused: invalid hop header", zap.String(keyAddr, r.RemoteAddr))
		http.Error(w, "invalid "+cluster.HopHeader+" header", http.StatusForbidden)
		return false
	}
	return true
}

// sessionGone answers for a session whose owner is gone: the client must
// initialize again (the spec's rule for an unknown session).
func sessionGone(w http.ResponseWriter) { http.Error(w, "session not found", http.StatusNotFound) }

// clusterSession serves r, a request of the streamable session sid, when
// another replica owns it (see clusterRoute), after checking the token
// (clusterOpen); it reports whether r is this process's to serve.
func (g *Gateway) clusterSession(w http.ResponseWriter, r *http.Request, sid string) bool {
	t, ok := g.clusterOpen(w, r, sid, cluster.KindSession)
	return ok && g.clusterRoute(w, r, &t)
}

// clusterSSE serves a POST of a legacy SSE session whose endpoint names a
// token: forwarded to its owner, or, on the owner, given the SDK's own
// session id back; it reports whether r is this process's to serve.
func (g *Gateway) clusterSSE(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	s := q.Get("sessionid")
	if r.Method != http.MethodPost || s == "" {
		return true // the SDK answers
	}
	t, ok := g.clusterOpen(w, r, s, cluster.KindSSE)
	if !ok || !g.clusterRoute(w, r, &t) {
		return false
	}
	q.Set("sessionid", t.Local)
	r.URL.RawQuery = q.Encode()
	return true
}

// sseTokens rewrites the endpoint event of a legacy SSE stream: the SDK's
// session id becomes a token naming this replica (Local: the SDK's id).
type sseTokens struct {
	http.ResponseWriter
	g    *Gateway
	p    cluster.Principal
	done bool
}

func (s *sseTokens) Write(b []byte) (int, error) {
	if s.done {
		return s.ResponseWriter.Write(b)
	}
	// The SDK writes each event in one Write; the first is the endpoint.
	s.done = true
	head, rest, ok := bytes.Cut(b, []byte("sessionid="))
	if !ok {
		return s.ResponseWriter.Write(b)
	}
	end := bytes.IndexAny(rest, "&\r\n")
	if end < 0 {
		end = len(rest)
	}
	sid, err := url.QueryUnescape(string(rest[:end]))
	if err != nil {
		return 0, fmt.Errorf("sse endpoint: %w", err)
	}
	tok, err := s.g.cluster.Issue(cluster.KindSSE, s.p, sid)
	if err != nil {
		return 0, err
	}
	out := make([]byte, 0, len(b)+len(tok))
	out = append(append(append(append(out, head...), "sessionid="...), tok...), rest[end:]...)
	if _, err := s.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush passes on the flushes SSE depends on.
func (s *sseTokens) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *sseTokens) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clusterStateless serves a 2026-07-28 POST whose body is body when it
// belongs to another replica, and reports whether it did:
//
//   - a retry with a requestState of the gateway's bridge goes to the
//     replica that parked the call (the state's route tag names it);
//   - a call to a per-client server, and every subscriptions/listen
//     stream, go to the principal's home replica (cluster.Node.Home), where
//     the principal's dedicated upstream sessions live; so do lists, and
//     calls of names the global lists lack, while a server lists per
//     client (the principal's own lists live there too).
//
// A request forwarded already, or whose target refuses the connection, is
// served here: the bridge refuses a state of another replica with a clear
// error, and a per-client session opens here when its home is gone. A
// request that reached its target is never served again here, even when
// the target failed before answering (502): it may have run there.
func (g *Gateway) clusterStateless(w http.ResponseWriter, r *http.Request, body []byte, sdk http.Handler) bool {
	if !g.clusterHop(w, r) {
		return true
	}
	if r.Header.Get(cluster.HopHeader) != "" {
		return false
	}
	target := g.statelessOwner(r, body)
	if target == "" || target == g.cluster.Self() {
		return false
	}
	serveHere := func(w http.ResponseWriter) {
		g.log.Info("serving here: the replica a request belongs to is unreachable", zap.String(keyOwner, target))
		g.serveStatelessBody(w, r, body, sdk)
	}
	// Of known length, the body is sent from memory (and again on a new
	// connection when a pooled one had closed), even if the client sent it
	// chunked.
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	g.cluster.Forward(w, r, target, serveHere)
	return true
}

// statelessOwner is the replica a 2026-07-28 request of body belongs to,
// "" for any.
func (g *Gateway) statelessOwner(r *http.Request, body []byte) string {
	if bytes.Contains(body, []byte(bridgeStatePrefix)) {
		var m struct {
			Params struct {
				RequestState string `json:"requestState"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && isBridgeState(m.Params.RequestState) {
			if owner, boot, ok := stateRoute(m.Params.RequestState, g.cluster.Keys().StateKeys()); ok && !g.cluster.Owns(owner, boot) {
				return owner
			}
			return ""
		}
	}
	env, err := envelope.Scan(body)
	if err != nil {
		return ""
	}
	var kind policy.Kind
	var name []byte
	switch string(env.Method.In(body)) {
	case `"tools/call"`:
		kind, name = policy.Tool, env.Name.In(body)
	case `"prompts/get"`:
		kind, name = policy.Prompt, env.Name.In(body)
	case `"resources/read"`:
		kind, name = policy.Resource, env.URI.In(body)
	case `"subscriptions/listen"`:
		// Updates of a per-client server come from the principal's own
		// upstream session, which lives on its home replica: the stream
		// lives there too.
		owner, _ := principalOf(r)
		return g.cluster.Home(owner)
	case `"tools/list"`, `"prompts/list"`, `"resources/list"`, `"resources/templates/list"`:
		if g.routes.Load().listedPerClient == nil {
			return ""
		}
		// The principal's own lists (principallists.go) come from its
		// dedicated sessions, at home.
		owner, _ := principalOf(r)
		return g.cluster.Home(owner)
	default:
		return ""
	}
	global := g.routes.Load()
	rt, ok := global.lookup(kind, string(envelope.Text(name)))
	if !ok && global.listedPerClient == nil || ok && rt.up.SessionMode() != config.SessionPerClient {
		return "" // not a name only the principal's own lists may have
	}
	owner, _ := principalOf(r)
	return g.cluster.Home(owner)
}

// clusterRestartOnly reports whether the cluster settings changed in a way
// that applies only at restart: all but the secrets, which a reload
// rotates (rotateCluster).
func clusterRestartOnly(now, running config.Cluster) bool {
	now.Secret, now.SecretFile, now.PreviousSecrets = "", "", nil
	running.Secret, running.SecretFile, running.PreviousSecrets = "", "", nil
	if now.Enabled() != running.Enabled() {
		return true
	}
	return !reflect.DeepEqual(now, running)
}

// pinCluster is now's cluster settings with running's values for what
// applies only at restart (every key but the secrets); cluster mode stays
// as it runs.
func pinCluster(now, running config.Cluster) config.Cluster {
	if now.Enabled() != running.Enabled() {
		return running
	}
	pinned := running
	pinned.Secret, pinned.SecretFile, pinned.PreviousSecrets = now.Secret, now.SecretFile, now.PreviousSecrets
	return pinned
}

// rotateCluster derives the keys of cfg's cluster secrets, when they
// changed, and puts them in force: the next token is issued under the new
// first secret, and tokens of the others still open. Derived once per
// reload, never per request.
func (g *Gateway) rotateCluster(cfg, running *config.Config) error {
	now, old := &cfg.Gateway.Cluster, &running.Gateway.Cluster
	if g.cluster == nil || (now.Secret == old.Secret && now.SecretFile == "" && slices.Equal(now.PreviousSecrets, old.PreviousSecrets)) {
		return nil
	}
	secret, previous, err := now.Secrets()
	if err != nil {
		return err
	}
	keys, err := cluster.NewKeys(secret, previous)
	if err != nil {
		return fmt.Errorf("gateway.cluster: %w", err)
	}
	g.cluster.SetKeys(keys)
	g.log.Info("cluster secrets rotated", zap.Int("accepted", 1+len(previous)))
	return nil
}

// openClusterStore opens the shared store of c, nil without one (it
// connects on first use).
func openClusterStore(c *config.Cluster) (*cluster.RedisStore, error) {
	if !c.Enabled() || c.Store == "" {
		return nil, nil
	}
	return cluster.OpenStore(c.Store)
}

// closeStore checks that the shared store answers (a warning when not:
// nothing needs it to serve yet) and returns what closes it at Close.
func (g *Gateway) closeStore(ctx context.Context) func() {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.store.Ping(pctx); err != nil {
		g.log.Warn("the cluster store does not answer", zap.Error(err))
	}
	return func() { g.store.Close() }
}
