package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/authn"
)

// FuzzRequestState: a requestState is client input. Verifying any string
// never panics, and only the exact state signed for a request verifies for
// it: not for another name or owner (another principal, or the same one
// authenticated otherwise), and not once changed.
func FuzzRequestState(f *testing.F) {
	s := stateSigner{key: newStateKey()}
	now := time.Now()
	owner := bindOwner(authn.MethodAPIKey, "key-0123456789abcdef01234567", "alice")
	good := s.sign(bridgeState{id: 7, round: 2, expires: now.Add(time.Minute)}, "tools/call", "a__x", owner)
	f.Add(good, "a__x", owner)
	f.Add(good, "a__x", bindOwner(authn.MethodAPIKey, "key-0123456789abcdef01234567", "bob"))
	f.Add(good, "a__x", bindOwner(authn.MethodJWT, "https://idp.example", "alice"))
	f.Add(good, "a__x", bindOwner(authn.MethodAPIKey, "key-ffffffffffffffffffffffff", "alice"))
	f.Add(good, "a__x", bindOwner("", "", "alice"))
	f.Add(good, "a__x", "alice")
	f.Add(good[:len(good)-1], "a__x", owner)
	f.Add(bridgeStatePrefix, "", "")
	f.Add(bridgeStatePrefix+"!!!", "a", "b")
	f.Add("upstream-state", "a__x", "alice")
	f.Fuzz(func(t *testing.T, state, name, principal string) {
		st, err := s.verify(state, "tools/call", name, principal, now)
		if err == nil {
			if state != good || name != "a__x" || principal != owner {
				t.Fatalf("verified a state not issued for it: %q for %q by %q -> %+v", state, name, principal, st)
			}
			if st.id != 7 || st.round != 2 {
				t.Fatalf("verified state names %+v", st)
			}
			return
		}
		if !strings.Contains(err.Error(), errBadState.Error()) {
			t.Fatalf("refusal does not say why: %v", err)
		}
	})
}

// TestRequestStateHasOneEncoding: only the exact string issued verifies,
// not another base64 spelling of the same bytes, nor the bytes without
// the gateway's prefix.
func TestRequestStateHasOneEncoding(t *testing.T) {
	s := stateSigner{key: newStateKey()}
	now := time.Now()
	good := s.sign(bridgeState{id: 7, round: 2, expires: now.Add(time.Minute)}, "tools/call", "a__x", "alice")
	if _, err := s.verify(good, "tools/call", "a__x", "alice", now); err != nil {
		t.Fatal(err)
	}
	alt := []byte(good)
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		if byte(c) == good[len(good)-1] {
			continue
		}
		alt[len(alt)-1] = byte(c)
		if _, err := s.verify(string(alt), "tools/call", "a__x", "alice", now); err == nil {
			t.Errorf("another spelling %q verifies", alt)
		}
	}
	if _, err := s.verify(strings.TrimPrefix(good, bridgeStatePrefix), "tools/call", "a__x", "alice", now); err == nil {
		t.Error("the state without its prefix verifies")
	}
}
