package loadgen

import (
	"context"
	"net/http"
	"time"
)

// pacer spaces one session's calls for Config.Rate. The zero pacer (no
// rate) never waits.
type pacer struct {
	interval time.Duration
	next     time.Time
	timer    *time.Timer
}

// newPacer returns the pacer of one of sessions sessions sharing rate
// calls per second.
func newPacer(rate float64, sessions int) *pacer {
	if rate <= 0 {
		return &pacer{}
	}
	return &pacer{interval: time.Duration(float64(sessions) / rate * float64(time.Second))}
}

// wait returns when the next call is due, true; false when ctx is done
// first.
func (p *pacer) wait(ctx context.Context) bool {
	if p.interval == 0 {
		return ctx.Err() == nil
	}
	now := time.Now()
	if p.next.IsZero() || p.next.Before(now) {
		p.next = now // behind (or the first call): no catching up in a burst
	}
	d := p.next.Sub(now)
	p.next = p.next.Add(p.interval)
	if d <= 0 {
		return ctx.Err() == nil
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		p.timer.Stop()
		return false
	case <-p.timer.C:
		return true
	}
}

// bearer sets a bearer token on every request through rt.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}
