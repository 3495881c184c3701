package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HopHeader marks a request one replica forwarded to another:
// "<expiry in Unix ms>.<HMAC>" under the cluster's hop key, over the
// expiry, the method, the request URI and the session id header. A request
// carrying a valid one is served where it arrives or refused: never
// forwarded again, so two replicas that disagree about an owner cannot
// bounce a request between them.
const HopHeader = "Manifold-Hop"

// hopLifetime bounds how long a hop header verifies: a forwarded request's
// headers arrive at once.
const hopLifetime = 30 * time.Second

// sessionHeader is the streamable HTTP session header, bound by the hop MAC.
const sessionHeader = "Mcp-Session-Id"

// hopValue returns the hop header value for r at now, under the issuing key.
func (k *Keys) hopValue(r *http.Request, now time.Time) string {
	exp := strconv.FormatInt(now.Add(hopLifetime).UnixMilli(), 10)
	return exp + "." + b64.EncodeToString(hopMAC(k.hop[0], exp, r))
}

func hopMAC(key []byte, exp string, r *http.Request) []byte {
	m := hmac.New(sha256.New, key)
	var n [binary.MaxVarintLen64]byte
	for _, part := range []string{"hop1", exp, r.Method, r.URL.RequestURI(), r.Header.Get(sessionHeader)} {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		m.Write([]byte(part))
	}
	return m.Sum(nil)
}

// Hop says whether r arrived forwarded by a replica: HopNone without the
// header, HopValid with a header a cluster key made for this request and
// not expired at now, HopInvalid with any other.
func (k *Keys) Hop(r *http.Request, now time.Time) HopState {
	v := r.Header.Get(HopHeader)
	if v == "" {
		return HopNone
	}
	exp, mac, ok := strings.Cut(v, ".")
	ms, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || now.UnixMilli() > ms || time.UnixMilli(ms).Sub(now) > 2*hopLifetime {
		return HopInvalid
	}
	got, err := b64.DecodeString(mac)
	if err != nil {
		return HopInvalid
	}
	for _, key := range k.hop {
		if hmac.Equal(got, hopMAC(key, exp, r)) {
			return HopValid
		}
	}
	return HopInvalid
}

// HopState is what Hop found.
type HopState int

// The hop states.
const (
	HopNone HopState = iota
	HopValid
	HopInvalid
)
