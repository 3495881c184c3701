package upcred

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// legacyMetadata is the transport of an OAuth client's discovery requests that accepts a
// 2025-03-26 server's authorization server metadata as that version of the specification
// did. A server without protected resource metadata is, by the 2025-03-26 rules, its own
// authorization server (its root), and its metadata at the root's
// /.well-known/oauth-authorization-server may name another issuer (an authorization server
// mounted under a path); RFC 8414's issuer check, which the go-sdk applies, refuses that.
// Only for an origin whose root protected resource metadata was just found absent, the
// issuer of the root's metadata document is taken to be the root. Every other response
// passes unchanged.
type legacyMetadata struct {
	base http.RoundTripper
	mu   sync.Mutex
	// noPRM are the origins whose root protected resource metadata answered other than 200.
	noPRM map[string]bool
}

const (
	prmRootPath = "/.well-known/oauth-protected-resource"
	asmRootPath = "/.well-known/oauth-authorization-server"
	// maxMetadataBytes bounds a metadata document read here.
	maxMetadataBytes = 1 << 20
)

func (l *legacyMetadata) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	origin := req.URL.Scheme + "://" + req.URL.Host
	switch {
	case strings.HasPrefix(req.URL.Path, prmRootPath):
		l.mu.Lock()
		if l.noPRM == nil {
			l.noPRM = map[string]bool{}
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			delete(l.noPRM, origin)
		case req.URL.Path == prmRootPath:
			l.noPRM[origin] = true
		}
		l.mu.Unlock()
	case req.URL.Path == asmRootPath && resp.StatusCode == http.StatusOK:
		l.mu.Lock()
		legacy := l.noPRM[origin]
		l.mu.Unlock()
		if !legacy {
			return resp, nil
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		var doc map[string]any
		if json.Unmarshal(body, &doc) == nil {
			if iss, _ := doc["issuer"].(string); iss != "" && iss != origin {
				doc["issuer"] = origin
				if b, merr := json.Marshal(doc); merr == nil {
					body = b
				}
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}
