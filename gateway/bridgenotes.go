package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// The notifications of a bridged call (bridge.go): progress and log
// messages an older upstream sends for the call go to the round serving it
// now, on that round's stream and, for progress, under that round's token:
// each round is a request of its own (a 2026-07-28 client over HTTP sends
// it on a connection of its own), and a round's stream ends with its
// input_required answer. What the upstream sends while no round serves the
// call (the gateway waits for the client's retry) is held, at most
// maxHeldNotes (the oldest dropped first), and sent at the start of the next
// round; the call's end drops what is held.

// maxHeldNotes bounds the notifications held for a bridged call between
// rounds.
const maxHeldNotes = 64

// bridgeNotes is where a bridged call's notifications go. The zero value
// holds them.
type bridgeNotes struct {
	// down is the round serving the call; nil between rounds.
	down *noteRound
	held []heldNote
	// dropped counts notes dropped because too many were held.
	dropped int
}

// noteRound is one round's destination: its session, its handler's context
// (which names its stream) and its progress token (nil: it asked for none).
type noteRound struct {
	ss       *mcp.ServerSession
	ctx      context.Context
	progress any
}

// heldNote is a notification held between rounds: progress or log.
type heldNote struct {
	progress *mcp.ProgressNotificationParams
	log      *mcpx.LoggingMessageParams
}

// roundOf is the destination of req, a round of a bridged call served
// under ctx.
func roundOf(ctx context.Context, req mcp.Request) *noteRound {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	r := &noteRound{ss: ss, ctx: ctx}
	if p, ok := req.GetParams().(interface{ GetProgressToken() any }); ok {
		r.progress = p.GetProgressToken()
	}
	return r
}

// attachNotes makes r, a round that serves bc now, the destination of its
// notifications, and sends it those held since the last round.
func (g *Gateway) attachNotes(bc *bridgedCall, r *noteRound) {
	bc.noteMu.Lock()
	defer bc.noteMu.Unlock()
	bc.notes.down = r
	held := bc.notes.held
	bc.notes.held = nil
	for _, n := range held {
		g.sendNote(bc, n)
	}
}

// detachNotes holds bc's notifications from now on: its round answers
// input_required.
func (bc *bridgedCall) detachNotes() {
	bc.noteMu.Lock()
	defer bc.noteMu.Unlock()
	bc.notes.down = nil
}

// heldNotes counts the notifications held for bc's next round.
func (bc *bridgedCall) heldNotes() int {
	bc.noteMu.Lock()
	defer bc.noteMu.Unlock()
	return len(bc.notes.held)
}

// note relays n, a notification of bc's upstream call, to the round
// serving it, or holds it for the next one.
func (g *Gateway) note(bc *bridgedCall, n heldNote) {
	bc.noteMu.Lock()
	defer bc.noteMu.Unlock()
	if bc.notes.down != nil {
		g.sendNote(bc, n)
		return
	}
	if len(bc.notes.held) == maxHeldNotes {
		bc.notes.held = bc.notes.held[1:]
		if bc.notes.dropped++; bc.notes.dropped == 1 {
			g.log.Warn("notifications of a bridged call dropped while waiting for the client", zap.String(keyName, bc.name))
		}
	}
	bc.notes.held = append(bc.notes.held, n)
}

// sendNote sends n to the round serving bc; progress under that round's
// token, or not at all when it asked for none. Called with bc.noteMu held,
// which keeps the notes in order.
func (g *Gateway) sendNote(bc *bridgedCall, n heldNote) {
	r := bc.notes.down
	if r.ss == nil {
		return
	}
	var err error
	switch {
	case n.progress != nil:
		if r.progress == nil {
			return
		}
		p := *n.progress
		p.ProgressToken = r.progress
		err = r.ss.NotifyProgress(r.ctx, &p)
	case n.log != nil:
		err = mcpx.Log(r.ctx, r.ss, n.log)
	}
	if err != nil {
		g.log.Debug("notification of a bridged call not delivered", zap.String(keyName, bc.name), zap.Error(err))
	}
}
