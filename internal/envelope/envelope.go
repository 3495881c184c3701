// Package envelope finds the fields of a JSON-RPC message that route it
// (jsonrpc, id, method, params and, in params, name, uri, arguments, _meta,
// _meta.progressToken and the 2026-07-28 protocol version in _meta; result
// and error in a response) with a JSON tokenizer, at their byte offsets,
// without decoding the rest, and rewrites the name, URI, id, progress token
// and per-hop _meta members in the bytes. It is the envelope of the
// gateway's raw data path.
//
// Scan accepts a message only when every JSON decoder reads these fields
// alike: a duplicate, escaped, non-ASCII or case-variant key where they are
// looked for, an unexpected type, or a routing string that is not valid
// UTF-8 makes it "not simple" (ErrNotSimple), and the caller takes the
// slow path, which decodes the message fully. A decoder that keeps the
// first of duplicate keys and one that keeps the last can thus never see
// different values in a simple message. Malformed JSON is ErrSyntax.
//
// Everything is safe for concurrent use; nothing allocates but Text of an
// escaped string and the rewrite's output.
package envelope

import (
	"errors"
	"fmt"
)

// Errors returned by Scan. ErrTruncated is also an ErrSyntax.
var (
	// ErrSyntax: the message is not valid JSON.
	ErrSyntax = errors.New("envelope: malformed JSON")
	// ErrTruncated: the message ends before its JSON value does.
	ErrTruncated = fmt.Errorf("%w: unexpected end of input", ErrSyntax)
	// ErrNotSimple: valid JSON that the fast path does not take (see the
	// package doc); the reason is in the wrapping error.
	ErrNotSimple = errors.New("envelope: not a simple envelope")
)

var (
	errDepth     = fmt.Errorf("%w: nested deeper than %d", ErrNotSimple, MaxDepth)
	errKey       = fmt.Errorf("%w: escaped, non-ASCII or case-variant key", ErrNotSimple)
	errDuplicate = fmt.Errorf("%w: duplicate key", ErrNotSimple)
	errType      = fmt.Errorf("%w: unexpected value type", ErrNotSimple)
	errText      = fmt.Errorf("%w: invalid UTF-8 or unpaired surrogate in a routing string", ErrNotSimple)
	errNotObject = fmt.Errorf("%w: not a JSON object", ErrNotSimple)
)

// Span is where one JSON value lies in a message: msg[Start:End], quotes
// included for a string. The zero Span means absent.
type Span struct{ Start, End int }

// Present reports whether the field was found.
func (s Span) Present() bool { return s.End > 0 }

// In returns the raw value in msg (nil when absent).
func (s Span) In(msg []byte) []byte {
	if !s.Present() {
		return nil
	}
	return msg[s.Start:s.End]
}

// Envelope is what Scan found in one message.
type Envelope struct {
	JSONRPC Span // a string
	ID      Span // a string or a number
	Method  Span // a string
	Params  Span // an object
	Result  Span // any value
	Error   Span // any value

	Name          Span // params.name: a string
	URI           Span // params.uri: a string
	Arguments     Span // params.arguments: an object
	Meta          Span // params._meta: an object
	ProgressToken Span // params._meta.progressToken: a string or a number
	// The per-request members of a 2026-07-28 request's params._meta
	// (SEP-2575), keys "io.modelcontextprotocol/…": the protocolVersion
	// (a string), clientCapabilities and clientInfo (objects) and
	// logLevel (a string).
	ProtocolVersion, ClientCapabilities, ClientInfo, LogLevel Span

	// Other keys seen, at the top level, in params, and in params._meta.
	TopOther, ParamsOther, MetaOther int
}

// IsResponse reports whether the envelope is a response: an id, no
// method, and exactly one of result and error.
func (e *Envelope) IsResponse() bool {
	return e.ID.Present() && !e.Method.Present() && e.Result.Present() != e.Error.Present()
}

var (
	topNames    = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsNames = []string{"name", "uri", "arguments", "_meta"}
	metaNames   = []string{"progressToken", "io.modelcontextprotocol/protocolVersion",
		"io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel"}
)

// Scan validates msg, one JSON value, and finds its envelope. On an error
// the Envelope is incomplete and must not be used.
func Scan(msg []byte) (Envelope, error) {
	s := scanner{b: msg}
	var e Envelope
	s.ws()
	if s.i >= len(msg) {
		return e, ErrTruncated
	}
	if msg[s.i] != '{' {
		if err := s.skip(0); err != nil {
			return e, err
		}
		if err := s.end(); err != nil {
			return e, err
		}
		return e, errNotObject
	}
	if err := s.top(&e); err != nil {
		return e, err
	}
	return e, s.end()
}

// ScanResponse is Scan for a message that must be a response
// (Envelope.IsResponse); anything else is not simple.
func ScanResponse(msg []byte) (Envelope, error) {
	e, err := Scan(msg)
	if err == nil && !e.IsResponse() {
		err = errNotResponse
	}
	return e, err
}

var errNotResponse = fmt.Errorf("%w: not a response", ErrNotSimple)

// end checks that nothing but blanks follows the value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return ErrSyntax
	}
	return nil
}

// members reads an object whose value starts at s.i, member by member:
// for each, value reads its value (s.i at its start) given the index of
// its key in names, or -1 for another key. A key among names that is
// escaped, non-ASCII or case-variant, or duplicated, is not simple.
func (s *scanner) members(names []string, value func(k int) error) error {
	empty, err := s.open()
	if err != nil || empty {
		return err
	}
	var seen uint
	for {
		m, err := s.key()
		if err != nil {
			return err
		}
		k, err := lookup(m, names)
		if err != nil {
			return err
		}
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return errDuplicate
			}
			seen |= 1 << k
		}
		if err := value(k); err != nil {
			return err
		}
		if more, err := s.next(); err != nil || !more {
			return err
		}
	}
}

// top reads the message's object.
func (s *scanner) top(e *Envelope) error {
	spans := [...]*Span{&e.JSONRPC, &e.ID, &e.Method, &e.Params, &e.Result, &e.Error}
	return s.members(topNames, func(k int) error {
		start := s.i
		var err error
		switch k {
		case 0, 2: // jsonrpc, method
			err = s.text()
		case 1: // id
			err = s.idValue()
		case 3: // params
			if s.b[s.i] != '{' {
				return s.typeError(1)
			}
			err = s.params(e)
		default:
			if k < 0 {
				e.TopOther++
			}
			err = s.skip(1)
		}
		if err == nil && k >= 0 {
			*spans[k] = Span{start, s.i}
		}
		return err
	})
}

// params reads the params object.
func (s *scanner) params(e *Envelope) error {
	spans := [...]*Span{&e.Name, &e.URI, &e.Arguments, &e.Meta}
	return s.members(paramsNames, func(k int) error {
		start := s.i
		var err error
		switch k {
		case 0, 1: // name, uri
			err = s.text()
		case 2: // arguments
			if s.b[s.i] != '{' {
				return s.typeError(2)
			}
			err = s.skip(2)
		case 3: // _meta
			if s.b[s.i] != '{' {
				return s.typeError(2)
			}
			err = s.meta(e)
		default:
			e.ParamsOther++
			err = s.skip(2)
		}
		if err == nil && k >= 0 {
			*spans[k] = Span{start, s.i}
		}
		return err
	})
}

// meta reads params._meta.
func (s *scanner) meta(e *Envelope) error {
	spans := [...]*Span{&e.ProgressToken, &e.ProtocolVersion, &e.ClientCapabilities, &e.ClientInfo, &e.LogLevel}
	return s.members(metaNames, func(k int) error {
		start := s.i
		var err error
		switch k {
		case 0: // progressToken
			err = s.idValue()
		case 1, 4: // protocolVersion, logLevel
			err = s.text()
		case 2, 3: // clientCapabilities, clientInfo
			if s.b[s.i] != '{' {
				return s.typeError(3)
			}
			err = s.skip(3)
		default:
			e.MetaOther++
			err = s.skip(3)
		}
		if err == nil && k >= 0 {
			*spans[k] = Span{start, s.i}
		}
		return err
	})
}

// text reads a routing string: valid UTF-8, every escaped surrogate paired.
func (s *scanner) text() error {
	if s.b[s.i] != '"' {
		return s.typeError(1)
	}
	start := s.i
	if _, err := s.str(); err != nil {
		return err
	}
	if !validText(s.b[start:s.i]) {
		return errText
	}
	return nil
}

// idValue reads an id or a progress token: a routing string or a number.
func (s *scanner) idValue() error {
	switch c := s.b[s.i]; {
	case c == '"':
		return s.text()
	case c == '-' || digit(c):
		return s.num()
	}
	return s.typeError(1)
}

// typeError passes the value of the wrong type at s.i, so that a malformed
// message is still reported as ErrSyntax, and returns errType.
func (s *scanner) typeError(depth int) error {
	if err := s.skip(depth); err != nil {
		return err
	}
	return errType
}
