package envelope

import (
	"errors"
	"fmt"
)

// Edit says what a rewrite replaces; the zero Edit changes nothing.
type Edit struct {
	// ID, when not nil, replaces the id: raw JSON, a string or a number.
	ID []byte
	// Name, when SetName, replaces params.name (encoded here).
	Name    string
	SetName bool
	// URI, when SetURI, replaces params.uri (encoded here).
	URI    string
	SetURI bool
	// ProgressToken, when not nil, replaces params._meta.progressToken:
	// raw JSON, a string or a number.
	ProgressToken []byte
	// MetaDrop, when not empty, leaves out of params._meta every member
	// whose key starts with it (but a progress token ProgressToken
	// replaces): the per-hop members a gateway must not pass on.
	MetaDrop string
	// MetaAdd, when not empty, is appended to params._meta: raw JSON
	// members ("k":v, joined by commas), which the caller keeps apart from
	// the keys MetaDrop leaves in. A _meta is added when params has none.
	MetaAdd []byte
}

// rebuildsMeta reports whether the edit rewrites _meta member by member.
func (ed *Edit) rebuildsMeta() bool { return ed.MetaDrop != "" || len(ed.MetaAdd) > 0 }

// ErrEdit: an Edit replaces a field the envelope lacks, or its raw JSON is
// not a single string or number.
var ErrEdit = errors.New("envelope: invalid edit")

// splice replaces msg[start:end] by raw, or by text quoted, or (meta) by
// params._meta rebuilt for the edit (appendMeta).
type splice struct {
	Span
	raw    []byte
	text   string
	quoted bool
	meta   bool
}

func (p splice) len(e *Envelope, msg []byte, ed *Edit) int {
	switch {
	case p.meta:
		return e.metaLen(msg, ed)
	case p.quoted:
		return quotedLen(p.text)
	}
	return len(p.raw)
}

// splices returns the edit's replacements in message order.
func (e *Envelope) splices(ed *Edit, withID bool) ([4]splice, int, error) {
	var out [4]splice
	n := 0
	place := func(p splice) {
		k := n
		for k > 0 && out[k-1].Start > p.Start {
			out[k] = out[k-1]
			k--
		}
		out[k] = p
		n++
	}
	add := func(sp Span, what string, p splice) error {
		if err := checkSplice(sp, what, &p); err != nil {
			return err
		}
		p.Span = sp
		place(p)
		return nil
	}
	if withID && ed.ID != nil {
		if err := add(e.ID, "id", splice{raw: ed.ID}); err != nil {
			return out, 0, err
		}
	}
	if ed.SetName {
		if err := add(e.Name, "params.name", splice{text: ed.Name, quoted: true}); err != nil {
			return out, 0, err
		}
	}
	if ed.SetURI {
		if err := add(e.URI, "params.uri", splice{text: ed.URI, quoted: true}); err != nil {
			return out, 0, err
		}
	}
	token := splice{raw: ed.ProgressToken}
	if ed.ProgressToken != nil {
		if err := checkSplice(e.ProgressToken, "params._meta.progressToken", &token); err != nil {
			return out, 0, err
		}
	}
	switch {
	case ed.rebuildsMeta() && e.Meta.Present():
		// The token, if replaced, is replaced by appendMeta.
		place(splice{Span: e.Meta, meta: true})
	case ed.rebuildsMeta():
		if !e.Params.Present() {
			return out, 0, fmt.Errorf("%w: the message has no params to add _meta to", ErrEdit)
		}
		at := e.Params.End - 1 // before the closing brace of params
		place(splice{Span: Span{at, at}, meta: true})
	case ed.ProgressToken != nil:
		token.Span = e.ProgressToken
		place(token)
	}
	return out, n, nil
}

// checkSplice refuses a replacement of a field msg lacks, or a raw value
// that is not a JSON string or number.
func checkSplice(sp Span, what string, p *splice) error {
	if !sp.Present() {
		return fmt.Errorf("%w: the message has no %s", ErrEdit, what)
	}
	if !p.quoted && !rawScalar(p.raw) {
		return fmt.Errorf("%w: %s must be a JSON string or number", ErrEdit, what)
	}
	return nil
}

// rawScalar reports whether raw is exactly one JSON string or number.
func rawScalar(raw []byte) bool {
	if len(raw) == 0 || !(raw[0] == '"' || raw[0] == '-' || digit(raw[0])) {
		return false
	}
	s := scanner{b: raw}
	return s.scalar() == nil && s.i == len(raw)
}

// Rewrite returns a new message: msg, which Scan read as e, with ed
// applied. The rest of msg is copied byte for byte; the output is the one
// allocation.
func (e *Envelope) Rewrite(msg []byte, ed Edit) ([]byte, error) {
	return e.rewrite(nil, msg, &ed, Span{0, len(msg)}, true)
}

// AppendRewrite is Rewrite appending to dst.
func (e *Envelope) AppendRewrite(dst, msg []byte, ed Edit) ([]byte, error) {
	return e.rewrite(dst, msg, &ed, Span{0, len(msg)}, true)
}

// AppendParams appends the params object of msg with ed applied (its ID
// is ignored): what a raw call sends upstream as its params.
func (e *Envelope) AppendParams(dst, msg []byte, ed Edit) ([]byte, error) {
	if !e.Params.Present() {
		return dst, fmt.Errorf("%w: the message has no params", ErrEdit)
	}
	return e.rewrite(dst, msg, &ed, e.Params, false)
}

func (e *Envelope) rewrite(dst, msg []byte, ed *Edit, window Span, withID bool) ([]byte, error) {
	sp, n, err := e.splices(ed, withID)
	if err != nil {
		return dst, err
	}
	size := window.End - window.Start
	for _, p := range sp[:n] {
		size += p.len(e, msg, ed) - (p.End - p.Start)
	}
	if cap(dst)-len(dst) < size {
		grown := make([]byte, len(dst), len(dst)+size)
		copy(grown, dst)
		dst = grown
	}
	at := window.Start
	for _, p := range sp[:n] {
		dst = append(dst, msg[at:p.Start]...)
		switch {
		case p.meta:
			dst = e.appendMeta(dst, msg, ed)
		case p.quoted:
			dst = appendQuoted(dst, p.text)
		default:
			dst = append(dst, p.raw...)
		}
		at = p.End
	}
	return append(dst, msg[at:window.End]...), nil
}

// AppendString appends v as a JSON string, escaped as encoding/json does
// but for HTML characters (an invalid UTF-8 byte becomes \ufffd).
func AppendString(dst []byte, v string) []byte { return appendQuoted(dst, v) }
