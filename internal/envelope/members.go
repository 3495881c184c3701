package envelope

import "fmt"

// Members finds the keys of names at the top level of obj, one JSON object
// (such as a result), and stores where each value lies in spans, which has
// one Span per name (the zero Span: absent). As in Scan, a key among names
// that is duplicated, or that is escaped, non-ASCII or case-variant, makes
// obj not simple (ErrNotSimple); the caller then decodes obj fully.
func Members(obj []byte, names []string, spans []Span) error {
	if len(spans) != len(names) || len(names) > 64 {
		return fmt.Errorf("%w: one span per name, at most 64", ErrEdit)
	}
	clear(spans)
	s := scanner{b: obj}
	s.ws()
	if s.i >= len(obj) {
		return ErrTruncated
	}
	if obj[s.i] != '{' {
		if err := s.skip(0); err != nil {
			return err
		}
		return errNotObject
	}
	empty, err := s.open()
	if err != nil {
		return err
	}
	if empty {
		return s.end()
	}
	var seen uint64
	for {
		m, err := s.key()
		if err != nil {
			return err
		}
		k, err := lookup(m, names)
		if err != nil {
			return err
		}
		start := s.i
		if err := s.skip(1); err != nil {
			return err
		}
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return errDuplicate
			}
			seen |= 1 << k
			spans[k] = Span{start, s.i}
		}
		if more, err := s.next(); err != nil || !more {
			if err == nil {
				err = s.end()
			}
			return err
		}
	}
}

// HasKey reports whether v, one JSON value, holds at any depth an object
// key that a decoder might read as key: equal to it but for case, or
// escaped, or non-ASCII (conservatively). It tells the raw path whether a
// result may hold something to rewrite, without decoding it.
func HasKey(v []byte, key string) (bool, error) {
	s := scanner{b: v, watch: key}
	if err := s.skip(0); err != nil {
		return false, err
	}
	if err := s.end(); err != nil {
		return false, err
	}
	return s.found, nil
}

// RemoveMember returns obj, one JSON object, without its top-level member
// key (and the comma that separated it), and whether it had one; obj
// itself when it had none. A key that is key but escaped, non-ASCII or
// case-variant, or a duplicate of it, is ErrNotSimple.
func RemoveMember(obj []byte, key string) ([]byte, bool, error) {
	names := []string{key}
	s := scanner{b: obj}
	s.ws()
	if s.i >= len(obj) {
		return obj, false, ErrTruncated
	}
	if obj[s.i] != '{' {
		if err := s.skip(0); err != nil {
			return obj, false, err
		}
		return obj, false, errNotObject
	}
	empty, err := s.open()
	if err != nil || empty {
		if err == nil {
			err = s.end()
		}
		return obj, false, err
	}
	cut := Span{}
	prevEnd := -1 // where the previous member's value ended
	for {
		keyStart := s.i
		m, err := s.key()
		if err != nil {
			return obj, false, err
		}
		k, err := lookup(m, names)
		if err != nil {
			return obj, false, err
		}
		if err := s.skip(1); err != nil {
			return obj, false, err
		}
		if k == 0 {
			if cut.Present() {
				return obj, false, errDuplicate
			}
			if prevEnd >= 0 {
				cut = Span{prevEnd, s.i} // ",key:value"
			} else {
				cut = Span{keyStart, s.i} // "key:value", and the comma after it below
			}
		}
		valueEnd := s.i
		more, err := s.next()
		if err != nil {
			return obj, false, err
		}
		if k == 0 && prevEnd < 0 && more {
			cut.End = s.i // the comma and the blanks up to the next key
		}
		if !more {
			if err := s.end(); err != nil {
				return obj, false, err
			}
			break
		}
		prevEnd = valueEnd
	}
	if !cut.Present() {
		return obj, false, nil
	}
	out := make([]byte, 0, len(obj)-(cut.End-cut.Start))
	out = append(out, obj[:cut.Start]...)
	return append(out, obj[cut.End:]...), true, nil
}
