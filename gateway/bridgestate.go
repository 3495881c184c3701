package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The requestState of the gateway's own input_required results (bridge.go).
//
// Format: bridgeStatePrefix, then base64url (no padding) of a 20-byte
// payload — the parked call's id (8 bytes), the round it answers (4) and
// its expiry in Unix milliseconds (8), big-endian — followed by the 32-byte
// HMAC-SHA256 of
//
//	bridgeStatePrefix ‖ payload ‖ method ‖ len(name) ‖ name ‖ owner
//
// (len as a uvarint: no name and owner can pass for another pair) under a
// random key made once per process. The owner (bindOwner) is the
// principal's key with how it authenticated: the method and the API key's
// id or the JWT's issuer. The method, the name (tool, prompt or URI as the
// client wrote it) and the owner are not in the payload: a state verifies
// only on a retry of the same request by the same principal authenticated
// the same way, so a state that was tampered with, or made for another
// call, principal or credential, fails alike. States do not survive a restart, and neither do
// the calls they name (docs/architecture.md, Decisions: replicas without affinity).
//
// The prefix tells the gateway's states from an upstream's, which pass
// through untouched: a 2026-07-28 upstream would have to mint a state
// beginning with it to be mistaken for the gateway's, and even then the MAC
// rejects it with a clear error rather than resuming anything.
const bridgeStatePrefix = "manifold-mrtr1."

const (
	statePayloadLen = 8 + 4 + 8
	stateMACLen     = sha256.Size
)

// bridgeState is what a requestState of the gateway names.
type bridgeState struct {
	id      uint64    // the parked call (bridge.calls)
	round   uint32    // the round whose input_required carried it
	expires time.Time // after which it is refused
}

// errBadState is the cause of every requestState refusal; the client gets
// it as -32602 (invalid params) with the reason.
var errBadState = errors.New("invalid requestState")

// stateSigner signs and verifies requestStates with key, 32 random bytes
// (newStateKey) that bridge.init sets once.
type stateSigner struct {
	key []byte
}

// newStateKey returns a random HMAC key.
func newStateKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		// crypto/rand does not fail on supported platforms; a gateway
		// that cannot make a key must not sign with a predictable one.
		panic(fmt.Sprintf("gateway: reading random bytes for the requestState key: %v", err))
	}
	return k
}

// bindOwner returns the owner a requestState is bound to: the
// authentication method, the credential's source (key id or issuer) and
// the principal's key, each but the last preceded by its length (uvarint),
// so that no two triples give the same owner.
func bindOwner(method, source, principal string) string {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(method)+len(source)+len(principal))
	b = binary.AppendUvarint(b, uint64(len(method)))
	b = append(b, method...)
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	return string(append(b, principal...))
}

// isBridgeState reports whether s is a requestState of the gateway (as
// opposed to an upstream's, or none).
func isBridgeState(s string) bool { return strings.HasPrefix(s, bridgeStatePrefix) }

// sign returns the requestState naming st, for method, name and owner
// (principal, as bindOwner makes it).
func (s *stateSigner) sign(st bridgeState, method, name, principal string) string {
	var buf [statePayloadLen + stateMACLen]byte
	binary.BigEndian.PutUint64(buf[0:8], st.id)
	binary.BigEndian.PutUint32(buf[8:12], st.round)
	binary.BigEndian.PutUint64(buf[12:20], uint64(st.expires.UnixMilli()))
	s.mac(buf[statePayloadLen:statePayloadLen], buf[:statePayloadLen], method, name, principal)
	return bridgeStatePrefix + base64.RawURLEncoding.EncodeToString(buf[:])
}

// verify checks state for a retry of method on name by principal (the
// owner, as bindOwner makes it) at now,
// and returns what it names. Errors wrap errBadState.
func (s *stateSigner) verify(state, method, name, principal string, now time.Time) (bridgeState, error) {
	// Strict: one encoding per state, so that only the string issued
	// verifies.
	enc, ok := strings.CutPrefix(state, bridgeStatePrefix)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if !ok || err != nil || len(raw) != statePayloadLen+stateMACLen {
		return bridgeState{}, fmt.Errorf("%w: malformed", errBadState)
	}
	payload, got := raw[:statePayloadLen], raw[statePayloadLen:]
	want := s.mac(make([]byte, 0, stateMACLen), payload, method, name, principal)
	if !hmac.Equal(got, want) {
		return bridgeState{}, fmt.Errorf("%w: it was not issued for this %s of %q by this principal, or was altered", errBadState, method, name)
	}
	st := bridgeState{
		id:      binary.BigEndian.Uint64(payload[0:8]),
		round:   binary.BigEndian.Uint32(payload[8:12]),
		expires: time.UnixMilli(int64(binary.BigEndian.Uint64(payload[12:20]))),
	}
	if !now.Before(st.expires) {
		return bridgeState{}, fmt.Errorf("%w: expired at %s", errBadState, st.expires.UTC().Format(time.RFC3339))
	}
	return st, nil
}

// mac appends to dst the HMAC of payload bound to method, name and
// principal.
func (s *stateSigner) mac(dst, payload []byte, method, name, principal string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(bridgeStatePrefix))
	m.Write(payload)
	m.Write([]byte(method))
	m.Write(binary.AppendUvarint(nil, uint64(len(name))))
	m.Write([]byte(name))
	m.Write([]byte(principal))
	return m.Sum(dst)
}
