package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// URL mode elicitation exists in protocol version 2025-11-25 only: its
// error (-32042, URLElicitationRequired, whose data lists the elicitations
// to complete) and its notification (notifications/elicitation/complete)
// are unknown to older clients, and 2026-07-28 removed both. The gateway
// passes them to 2025-11-25 clients unchanged and translates or drops them
// for the others.

// urlElicitationVersion is the only protocol version with URL elicitation's
// error and completion notification.
const urlElicitationVersion = "2025-11-25"

// knowsURLElicitation reports whether a client on version knows -32042 and
// notifications/elicitation/complete.
func knowsURLElicitation(version string) bool {
	return version >= urlElicitationVersion && !mcpx.Stateless(version)
}

// translateError returns err, the error of a call to up, as the client of
// ss on version should get it. Only -32042 changes:
//   - a 2025-11-25 client gets it unchanged, code, message and data; the
//     elicitation ids in its data are remembered, so that the upstream's
//     notifications/elicitation/complete reaches this session;
//   - any other client (older, or 2026-07-28, for which -32042 is
//     reserved and must not be sent) gets, for tools/call, a tool result
//     with isError whose text names each URL to open and says to retry,
//     and for prompts/get and resources/read a JSON-RPC internal error
//     (-32603) with that text, the original data kept.
func translateError[Q callerRequest, R mcp.Result](g *Gateway, m *method[Q, R], ss *mcp.ServerSession, version string, up *upstream.Upstream, res R, err error) (R, error) {
	text, data, translate := g.urlElicitationError(ss, version, up, err)
	if !translate {
		return res, err
	}
	if r, ok := m.toolError(text); ok {
		return r, nil
	}
	var zero R
	return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: text, Data: data}
}

// urlElicitationError is translateError's decision, for either path: for
// a -32042 error the client of ss on version does not know, the text to
// answer with and the error's data (translate); a -32042 error it knows
// has its elicitation ids remembered and passes unchanged.
func (g *Gateway) urlElicitationError(ss *mcp.ServerSession, version string, up *upstream.Upstream, err error) (text string, data json.RawMessage, translate bool) {
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok || rpcErr.Code != mcp.CodeURLElicitationRequired {
		return "", nil, false
	}
	elicitations := urlElicitationsOf(rpcErr)
	if knowsURLElicitation(version) {
		for _, e := range elicitations {
			g.bridge.urls.remember(up, e.ElicitationID, ss, version)
		}
		return "", nil, false
	}
	return urlElicitationText(rpcErr, elicitations), rpcErr.Data, true
}

// urlElicitationsOf returns the elicitations of a -32042 error's data.
func urlElicitationsOf(e *jsonrpc.Error) []*mcp.ElicitParams {
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &data) // unreadable data: no URLs to name
	}
	return data.Elicitations
}

// urlElicitationText explains a -32042 error to a client that does not
// know it.
func urlElicitationText(e *jsonrpc.Error, elicitations []*mcp.ElicitParams) string {
	var b strings.Builder
	b.WriteString("URL elicitation required: ")
	b.WriteString(e.Message)
	for _, el := range elicitations {
		if el == nil || el.URL == "" {
			continue
		}
		fmt.Fprintf(&b, "\n- open %s", el.URL)
		if el.Message != "" {
			fmt.Fprintf(&b, " (%s)", el.Message)
		}
	}
	b.WriteString("\nThen retry the request.")
	return b.String()
}

// URL elicitations sent to sessions, remembered until their upstream says
// they are complete, at most urlElicitationTTL, and at most
// maxURLElicitations at a time.
const (
	urlElicitationTTL  = time.Hour
	maxURLElicitations = 4096
)

// urlElicitations maps the URL elicitations the gateway delivered to
// 2025-11-25 sessions, by upstream and elicitation id, to their session.
// The zero value is ready.
type urlElicitations struct {
	mu sync.Mutex
	m  map[urlElicitationKey]urlElicitationTarget
}

type urlElicitationKey struct {
	up *upstream.Upstream
	id string
}

type urlElicitationTarget struct {
	ss      *mcp.ServerSession
	version string
	at      time.Time
	// ambiguous: the same id went to two sessions; its completion goes to
	// neither.
	ambiguous bool
}

// remember notes that the URL elicitation id of up went to ss, a session
// on version.
func (u *urlElicitations) remember(up *upstream.Upstream, id string, ss *mcp.ServerSession, version string) {
	if id == "" || ss == nil {
		return
	}
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[urlElicitationKey]urlElicitationTarget{}
	}
	k := urlElicitationKey{up, id}
	if t, ok := u.m[k]; ok {
		t.ambiguous = t.ambiguous || t.ss != ss
		t.at = now
		u.m[k] = t
		return
	}
	if len(u.m) >= maxURLElicitations {
		for k, t := range u.m {
			if now.Sub(t.at) > urlElicitationTTL {
				delete(u.m, k)
			}
		}
		if len(u.m) >= maxURLElicitations {
			return // its completion will not be relayed
		}
	}
	u.m[k] = urlElicitationTarget{ss: ss, version: version, at: now}
}

// take returns and forgets the session the URL elicitation id of up went
// to; false when unknown, expired or ambiguous.
func (u *urlElicitations) take(up *upstream.Upstream, id string) (urlElicitationTarget, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := urlElicitationKey{up, id}
	t, ok := u.m[k]
	if !ok {
		return t, false
	}
	delete(u.m, k)
	return t, !t.ambiguous && time.Since(t.at) <= urlElicitationTTL
}

// notifyTimeout bounds the delivery of a relayed notification that has no
// call to travel with.
const notifyTimeout = 5 * time.Second

// ElicitationComplete relays notifications/elicitation/complete from an
// upstream to the one session its URL elicitation was delivered to, when
// that session is on 2025-11-25; it is dropped otherwise (unknown id,
// another version, or an id that went to two sessions), never sent to
// another session. It goes on the session's own stream (the GET stream of
// streamable HTTP).
func (r relay) ElicitationComplete(from *upstream.Upstream, p *mcp.ElicitationCompleteParams) {
	if p == nil || p.ElicitationID == "" {
		return
	}
	t, ok := r.g.bridge.urls.take(from, p.ElicitationID)
	if !ok || !knowsURLElicitation(t.version) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	if err := t.ss.NotifyElicitationComplete(ctx, p); err != nil {
		r.g.log.Debug("elicitation completion not delivered", zap.String(keyServer, from.Name()), zap.Error(err))
	}
}

// rememberURLElicitation notes a URL elicitation relayed from up to the
// client of o, for its completion notification.
func (r relay) rememberURLElicitation(from *upstream.Upstream, p *mcp.ElicitParams, o *origin) {
	if p.Mode != "url" || p.ElicitationID == "" {
		return
	}
	if _, version := o.client(); knowsURLElicitation(version) {
		r.g.bridge.urls.remember(from, p.ElicitationID, o.ss, version)
	}
}
