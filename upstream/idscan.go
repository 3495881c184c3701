package upstream

import (
	"bytes"
	"encoding/json"
)

// maxIDBytes bounds the id idScanner keeps: longer ids are not answered.
const maxIDBytes = 256

// idScanner reads a JSON-RPC message fed to it in pieces and finds its
// top-level "id" value and whether it has a top-level "method", keeping
// O(1) state: everything else is skipped, not stored. It is what lets an
// oversized message on a stream be answered (as an error for its id)
// without being held in memory. Keys written with escapes are not
// recognised.
type idScanner struct {
	depth    int  // 1 inside the top-level object
	inString bool // inside a string
	escaped  bool // after a backslash in a string
	isKey    bool // the string being read is a top-level key
	wantKey  bool // at depth 1, the next string is a key
	key      [8]byte
	keyLen   int // -1: longer than key
	inID     bool
	id       []byte
	idBad    bool // not a string or number, or too long
	method   bool
}

// write feeds the next piece of the message.
func (s *idScanner) write(p []byte) {
	for _, c := range p {
		s.byte(c)
	}
}

func (s *idScanner) byte(c byte) {
	if s.inID && (s.depth > 1 || s.inString || c > ' ' && c != ',' && c != '}') {
		if len(s.id) < maxIDBytes {
			s.id = append(s.id, c)
		} else {
			s.idBad = true
		}
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
			if s.isKey {
				s.keyLen = -1
			}
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.isKey {
				s.isKey, s.wantKey = false, false
			}
		case s.isKey && s.keyLen >= 0 && s.keyLen < len(s.key):
			s.key[s.keyLen] = c
			s.keyLen++
		case s.isKey:
			s.keyLen = -1
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.wantKey {
			s.isKey, s.keyLen = true, 0
		}
	case '{', '[':
		s.depth++
		if s.depth == 1 {
			s.wantKey = c == '{'
		}
	case '}', ']':
		if s.depth == 1 {
			s.endValue()
		}
		s.depth--
	case ':':
		if s.depth == 1 && s.keyLen >= 0 {
			switch string(s.key[:s.keyLen]) {
			case "id":
				s.inID, s.id, s.idBad = true, s.id[:0], false
			case "method":
				s.method = true
			}
		}
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.wantKey, s.keyLen = true, -1
		}
	}
}

// endValue ends the value of a top-level key.
func (s *idScanner) endValue() {
	s.inID = false
	s.keyLen = -1
}

// response returns the id of a response (a message with an id that is a
// string or a number, and no method), or nil.
func (s *idScanner) response() json.RawMessage {
	if s.method {
		return nil
	}
	return s.requestID()
}

// requestID returns the id, a string or a number, or nil.
func (s *idScanner) requestID() json.RawMessage {
	if s.idBad || len(s.id) == 0 {
		return nil
	}
	id := bytes.TrimSpace(s.id)
	if len(id) == 0 || !(id[0] == '"' || id[0] == '-' || '0' <= id[0] && id[0] <= '9') || !json.Valid(id) {
		return nil
	}
	return id
}
