package console

import (
	"crypto/sha256"
	"github.com/manifold-mcp/manifold/internal/oidc"
	"sync"
	"time"
)

// cookieName is the console's session cookie.
const cookieName = "manifold_console"

// sessions holds the console's sign-ins: a random id, kept in the browser as an HttpOnly
// cookie, names the credential the operator signed in with, which stays here. Every request
// checks that credential again (Source.Authorize), so a reload that removes a key or an
// operator entry ends its console sessions at their next request. Sessions are lost on
// restart. Its methods are safe for concurrent use.
type sessions struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	// m is keyed by the SHA-256 of the id, so that a lookup's timing says nothing about
	// the ids held.
	m map[[sha256.Size]byte]*session
}

// session is one sign-in.
type session struct {
	token   string // the credential: never rendered, never logged
	created time.Time
	expires time.Time
}

func newSessions(max int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{max: max, ttl: ttl, now: now, m: map[[sha256.Size]byte]*session{}}
}

// create keeps a session for token and returns its id and expiry.
func (s *sessions) create(token string) (id string, expires time.Time) {
	id = oidc.RandomID()
	now := s.now()
	sess := &session{token: token, created: now, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.m) >= s.max {
		s.dropOldestLocked()
	}
	s.m[sha256.Sum256([]byte(id))] = sess
	return id, sess.expires
}

// token returns the credential of session id, if it exists and has not expired.
func (s *sessions) token(id string) (string, bool) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key]
	if !ok {
		return "", false
	}
	if !s.now().Before(sess.expires) {
		delete(s.m, key)
		return "", false
	}
	return sess.token, true
}

// remove ends session id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(id)))
}

// len returns the number of sessions kept.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *sessions) expireLocked(now time.Time) {
	for k, sess := range s.m {
		if !now.Before(sess.expires) {
			delete(s.m, k)
		}
	}
}

func (s *sessions) dropOldestLocked() {
	var oldest [sha256.Size]byte
	var at time.Time
	for k, sess := range s.m {
		if at.IsZero() || sess.created.Before(at) {
			oldest, at = k, sess.created
		}
	}
	delete(s.m, oldest)
}
