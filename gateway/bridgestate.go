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
//
// In cluster mode (clusterSigner) the key is derived from the cluster
// secret, so that every replica verifies a state, previous keys are still
// accepted, and the payload names the replica that parked the call: its
// boot id and advertised address follow the 20 bytes above, then a
// 16-byte route tag (HMAC of the payload alone), then the MAC. The route
// tag lets a replica that cannot verify the MAC (it needs the call's
// principal) trust the owner enough to forward the retry there (stateRoute).
type stateSigner struct {
	key   []byte
	keys  func() [][]byte // cluster mode: the keys, the issuing one first (rotated at reload)
	owner string          // cluster mode: this replica's advertised address
	boot  uint64          // cluster mode: this process's boot id
}

// routeTagLen is the size of a cluster state's route tag.
const routeTagLen = 16

// clusterSigner returns the signer of cluster mode: keys returns the keys
// (the issuing one first), owner and boot are this process's.
func clusterSigner(keys func() [][]byte, owner string, boot uint64) stateSigner {
	return stateSigner{keys: keys, owner: owner, boot: boot}
}

// all returns the keys a state may verify under, the signing one first.
func (s *stateSigner) all() [][]byte {
	if s.keys != nil {
		return s.keys()
	}
	return [][]byte{s.key}
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
	key := s.all()[0]
	buf := make([]byte, statePayloadLen, statePayloadLen+8+len(s.owner)+routeTagLen+stateMACLen)
	binary.BigEndian.PutUint64(buf[0:8], st.id)
	binary.BigEndian.PutUint32(buf[8:12], st.round)
	binary.BigEndian.PutUint64(buf[12:20], uint64(st.expires.UnixMilli()))
	signed := statePayloadLen
	if s.owner != "" {
		buf = binary.BigEndian.AppendUint64(buf, s.boot)
		buf = append(buf, s.owner...)
		buf = routeTag(buf, key, buf)
		signed = len(buf)
	}
	buf = mac(buf, key, buf[:signed], method, name, principal)
	return bridgeStatePrefix + base64.RawURLEncoding.EncodeToString(buf)
}

// routeTag appends to dst the route tag of a cluster state's payload.
func routeTag(dst, key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("route:" + bridgeStatePrefix))
	m.Write(payload)
	return m.Sum(dst)[:len(dst)+routeTagLen]
}

// stateRoute returns the replica (advertised address and boot id) that
// parked the call a cluster state names, when its route tag verifies under
// one of keys; ok is false for anything else, which the bridge then
// refuses wherever it lands.
func stateRoute(state string, keys [][]byte) (owner string, boot uint64, ok bool) {
	enc, ok := strings.CutPrefix(state, bridgeStatePrefix)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if !ok || err != nil || len(raw) <= statePayloadLen+8+routeTagLen+stateMACLen {
		return "", 0, false
	}
	tagged := raw[:len(raw)-stateMACLen]
	payload, tag := tagged[:len(tagged)-routeTagLen], tagged[len(tagged)-routeTagLen:]
	for _, k := range keys {
		if hmac.Equal(tag, routeTag(nil, k, payload)) {
			return string(payload[statePayloadLen+8:]), binary.BigEndian.Uint64(payload[statePayloadLen:]), true
		}
	}
	return "", 0, false
}

// verify checks state for a retry of method on name by principal (the
// owner, as bindOwner makes it) at now,
// and returns what it names. Errors wrap errBadState.
func (s *stateSigner) verify(state, method, name, principal string, now time.Time) (bridgeState, error) {
	// Strict: one encoding per state, so that only the string issued
	// verifies.
	enc, ok := strings.CutPrefix(state, bridgeStatePrefix)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	want := statePayloadLen + stateMACLen
	if s.owner != "" {
		want = len(raw) // checked below: a cluster state's owner varies in length
		if len(raw) <= statePayloadLen+8+routeTagLen+stateMACLen {
			want = -1
		}
	}
	if !ok || err != nil || len(raw) != want {
		return bridgeState{}, fmt.Errorf("%w: malformed", errBadState)
	}
	signed, got := raw[:len(raw)-stateMACLen], raw[len(raw)-stateMACLen:]
	verified := false
	for _, k := range s.all() {
		if hmac.Equal(got, mac(make([]byte, 0, stateMACLen), k, signed, method, name, principal)) {
			verified = true
			break
		}
	}
	if !verified {
		return bridgeState{}, fmt.Errorf("%w: it was not issued for this %s of %q by this principal, or was altered", errBadState, method, name)
	}
	payload := signed[:statePayloadLen]
	if s.owner != "" {
		at := signed[statePayloadLen : len(signed)-routeTagLen]
		owner, boot := string(at[8:]), binary.BigEndian.Uint64(at[:8])
		if owner != s.owner || boot != s.boot {
			return bridgeState{}, fmt.Errorf("%w: the replica that held its call (%s) restarted or is gone, and the call with it; call again without requestState", errBadState, owner)
		}
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

// mac appends to dst the HMAC under key of payload bound to method, name
// and principal.
func mac(dst, key, payload []byte, method, name, principal string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(bridgeStatePrefix))
	m.Write(payload)
	m.Write([]byte(method))
	m.Write(binary.AppendUvarint(nil, uint64(len(name))))
	m.Write([]byte(name))
	m.Write([]byte(principal))
	return m.Sum(dst)
}
