package envelope

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Validate reports whether msg is exactly one JSON value (blanks around it
// allowed): nil, ErrTruncated when it ends too early, or ErrSyntax. Values
// nested deeper than MaxDepth are reported as not simple.
func Validate(msg []byte) error {
	s := scanner{b: msg}
	if err := s.skip(0); err != nil {
		return err
	}
	return s.end()
}

// validText reports whether the string token tok (quotes included) is
// valid UTF-8 and pairs every escaped surrogate, so that every decoder
// reads it alike.
func validText(tok []byte) bool {
	if !utf8.Valid(tok) {
		return false
	}
	_, ok := unquote(nil, tok, false)
	return ok
}

// Text returns the value of a string token that Scan reported (Name, URI,
// Method, JSONRPC, or an ID or ProgressToken that is a string), decoded:
// a subslice of tok when it holds no escape (no allocation), else a
// decoded copy. Any other token is returned as is.
func Text(tok []byte) []byte {
	if len(tok) < 2 || tok[0] != '"' {
		return tok
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	out, _ := unquote(make([]byte, 0, len(inner)), tok, true)
	return out
}

// unquote decodes the escapes of a validated string token into dst (when
// write) and reports false for an unpaired surrogate escape.
func unquote(dst, tok []byte, write bool) ([]byte, bool) {
	in := tok[1 : len(tok)-1]
	for i := 0; i < len(in); {
		c := in[i]
		if c != '\\' {
			j := i + 1
			for j < len(in) && in[j] != '\\' {
				j++
			}
			if write {
				dst = append(dst, in[i:j]...)
			}
			i = j
			continue
		}
		e := in[i+1]
		if e != 'u' {
			if write {
				dst = append(dst, unescape[e])
			}
			i += 2
			continue
		}
		r := hex4(in[i+2 : i+6])
		i += 6
		switch {
		case utf16.IsSurrogate(r):
			if r >= 0xDC00 || i+6 > len(in) || in[i] != '\\' || in[i+1] != 'u' {
				return dst, false
			}
			r = utf16.DecodeRune(r, hex4(in[i+2:i+6]))
			if r == utf8.RuneError {
				return dst, false
			}
			i += 6
		}
		if write {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst, true
}

var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | rune(hexVal(c))
	}
	return r
}

const hexDigits = "0123456789abcdef"

// quotedLen is the length of appendQuoted's output for v.
func quotedLen(v string) int {
	n := 2
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendQuoted appends v as a JSON string, escaped as encoding/json does
// but for HTML characters: an invalid UTF-8 byte becomes \ufffd.
func appendQuoted(dst []byte, v string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			dst = append(dst, v[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
