package envelope

import "unicode/utf8"

// MaxDepth bounds the nesting of arrays and objects in a message Scan
// accepts; a deeper message is not simple (the slow path decides).
const MaxDepth = 512

// scanner is a JSON tokenizer over one message: it validates every byte
// and keeps nothing but its position and, while skipping a value, one bit
// per open container.
type scanner struct {
	b []byte
	i int
	// watch, when set, is a key that skip looks out for (HasKey): found
	// reports a key equal to it but for case, or escaped or non-ASCII.
	watch string
	found bool
}

// safe marks the bytes a string may hold without a closer look: everything
// but the quote, the backslash and control characters.
var safe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the string token at s.i (the opening quote) and reports
// whether it holds a backslash escape.
func (s *scanner) str() (escaped bool, err error) {
	b, i := s.b, s.i+1
	for {
		for i < len(b) && safe[b[i]] {
			i++
		}
		if i >= len(b) {
			return false, ErrTruncated
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return false, ErrTruncated
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						return false, ErrTruncated
					}
					if hexVal(b[k]) < 0 {
						return false, ErrSyntax
					}
				}
				i += 6
			default:
				return false, ErrSyntax
			}
		default: // a control character
			return false, ErrSyntax
		}
	}
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

// num reads the number at s.i, with JSON's grammar.
func (s *scanner) num() error {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	digits := func() error {
		if i >= len(b) {
			return ErrTruncated
		}
		if !digit(b[i]) {
			return ErrSyntax
		}
		for i < len(b) && digit(b[i]) {
			i++
		}
		return nil
	}
	switch {
	case i >= len(b):
		return ErrTruncated
	case b[i] == '0':
		i++
	case digit(b[i]):
		if err := digits(); err != nil {
			return err
		}
	default:
		return ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if err := digits(); err != nil {
			return err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if err := digits(); err != nil {
			return err
		}
	}
	s.i = i
	return nil
}

// lit reads true, false or null at s.i.
func (s *scanner) lit() error {
	var want string
	switch s.b[s.i] {
	case 't':
		want = "true"
	case 'f':
		want = "false"
	default:
		want = "null"
	}
	for k := 0; k < len(want); k++ {
		if s.i+k >= len(s.b) {
			return ErrTruncated
		}
		if s.b[s.i+k] != want[k] {
			return ErrSyntax
		}
	}
	s.i += len(want)
	return nil
}

// scalar reads the string, number or literal at s.i.
func (s *scanner) scalar() error {
	switch c := s.b[s.i]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || digit(c):
		return s.num()
	case c == 't' || c == 'f' || c == 'n':
		return s.lit()
	}
	return ErrSyntax
}

// colon reads the ':' after a key (and the blanks around it).
func (s *scanner) colon() error {
	s.ws()
	if s.i >= len(s.b) {
		return ErrTruncated
	}
	if s.b[s.i] != ':' {
		return ErrSyntax
	}
	s.i++
	s.ws()
	if s.i >= len(s.b) {
		return ErrTruncated
	}
	return nil
}

// skipKey reads a member's key and its colon.
func (s *scanner) skipKey() error {
	if s.i >= len(s.b) {
		return ErrTruncated
	}
	if s.b[s.i] != '"' {
		return ErrSyntax
	}
	start := s.i + 1
	esc, err := s.str()
	if err != nil {
		return err
	}
	if s.watch != "" && !s.found {
		_, kerr := lookup(member{key: s.b[start : s.i-1], escaped: esc}, []string{s.watch})
		s.found = kerr != nil || asciiFold(s.b[start:s.i-1], s.watch)
	}
	return s.colon()
}

// skip validates and passes the value at s.i, found inside depth
// containers, without recursion: one bit per open container (1: object).
func (s *scanner) skip(depth int) error {
	var stack [MaxDepth/64 + 1]uint64
	n := 0
outer:
	for {
		s.ws()
		if s.i >= len(s.b) {
			return ErrTruncated
		}
		switch c := s.b[s.i]; c {
		case '{', '[':
			if depth+n >= MaxDepth {
				return errDepth
			}
			if c == '{' {
				stack[n/64] |= 1 << (n % 64)
			} else {
				stack[n/64] &^= 1 << (n % 64)
			}
			n++
			s.i++
			s.ws()
			if s.i >= len(s.b) {
				return ErrTruncated
			}
			switch {
			case c == '{' && s.b[s.i] == '}', c == '[' && s.b[s.i] == ']':
				s.i++
				n--
			case c == '{':
				if err := s.skipKey(); err != nil {
					return err
				}
				continue
			default:
				continue
			}
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		// A value ended: close what it ends, or go on to the next one.
		for n > 0 {
			s.ws()
			if s.i >= len(s.b) {
				return ErrTruncated
			}
			obj := stack[(n-1)/64]>>((n-1)%64)&1 == 1
			switch c := s.b[s.i]; {
			case c == ',':
				s.i++
				if obj {
					s.ws()
					if err := s.skipKey(); err != nil {
						return err
					}
				}
				continue outer
			case obj && c == '}', !obj && c == ']':
				s.i++
				n--
			default:
				return ErrSyntax
			}
		}
		return nil
	}
}

// member is one key of an object being walked.
type member struct {
	key     []byte // between the quotes, undecoded
	escaped bool
}

// open reads the '{' at s.i; empty reports "{}" (then read whole).
func (s *scanner) open() (empty bool, err error) {
	s.i++
	s.ws()
	if s.i >= len(s.b) {
		return false, ErrTruncated
	}
	if s.b[s.i] == '}' {
		s.i++
		return true, nil
	}
	return false, nil
}

// key reads a member's key and colon, leaving s.i at its value.
func (s *scanner) key() (member, error) {
	if s.i >= len(s.b) {
		return member{}, ErrTruncated
	}
	if s.b[s.i] != '"' {
		return member{}, ErrSyntax
	}
	start := s.i + 1
	esc, err := s.str()
	if err != nil {
		return member{}, err
	}
	m := member{key: s.b[start : s.i-1], escaped: esc}
	return m, s.colon()
}

// next reads what follows a member's value: more reports ',' (the next
// key follows), or else the closing '}' was read.
func (s *scanner) next() (more bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, ErrTruncated
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.ws()
		return true, nil
	case '}':
		s.i++
		return false, nil
	}
	return false, ErrSyntax
}

// lookup returns the index of m's key in names, or -1 for another key. A
// key that is escaped, holds a non-ASCII byte, or matches a name but for
// case is not simple: decoders that fold case or decode escapes would see
// one of the names where an exact match does not.
func lookup(m member, names []string) (int, error) {
	if m.escaped {
		return 0, errKey
	}
	for _, c := range m.key {
		if c >= utf8.RuneSelf {
			return 0, errKey
		}
	}
	for k, name := range names {
		if string(m.key) == name {
			return k, nil
		}
		if asciiFold(m.key, name) {
			return 0, errKey
		}
	}
	return -1, nil
}

func asciiFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for k := range b {
		x, y := b[k], s[k]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
