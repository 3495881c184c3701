package envelope

// walkMeta emits, piece by piece, params._meta of msg rebuilt for ed: each
// member but those MetaDrop names, in order and byte for byte, the progress
// token replaced when ed has one, then ed.MetaAdd. Where msg has no _meta,
// it emits a new member of params (`,"_meta":{…}`), or nothing when there is
// nothing to add. Each piece is either s or b.
func (e *Envelope) walkMeta(msg []byte, ed *Edit, emit func(s string, b []byte)) {
	if !e.Meta.Present() {
		if len(ed.MetaAdd) == 0 {
			return
		}
		if !emptyObject(e.Params.In(msg)) {
			emit(",", nil)
		}
		emit(`"_meta":`, nil)
	}
	emit("{", nil)
	first := true
	member := func(b ...[]byte) {
		if !first {
			emit(",", nil)
		}
		first = false
		for _, p := range b {
			emit("", p)
		}
	}
	if e.Meta.Present() {
		// Scan accepted msg: the members are well formed.
		s := scanner{b: msg[:e.Meta.End], i: e.Meta.Start}
		if empty, _ := s.open(); !empty {
			for more := true; more; more, _ = s.next() {
				start := s.i
				m, _ := s.key()
				value := s.i
				_ = s.skip(3)
				switch {
				case ed.ProgressToken != nil && value == e.ProgressToken.Start:
					// Replaced, whatever MetaDrop says of its key.
					member(msg[start:value], ed.ProgressToken)
				case ed.MetaDrop != "" && hasPrefix(m.key, ed.MetaDrop):
				default:
					member(msg[start:s.i])
				}
			}
		}
	}
	if len(ed.MetaAdd) > 0 {
		member(ed.MetaAdd)
	}
	emit("}", nil)
}

// appendMeta appends what walkMeta emits.
func (e *Envelope) appendMeta(dst, msg []byte, ed *Edit) []byte {
	e.walkMeta(msg, ed, func(s string, b []byte) {
		dst = append(dst, s...)
		dst = append(dst, b...)
	})
	return dst
}

// metaLen is the length of what walkMeta emits.
func (e *Envelope) metaLen(msg []byte, ed *Edit) int {
	n := 0
	e.walkMeta(msg, ed, func(s string, b []byte) { n += len(s) + len(b) })
	return n
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// emptyObject reports whether obj, a JSON object, has no members.
func emptyObject(obj []byte) bool {
	for _, c := range obj[1 : len(obj)-1] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}
