package authn

// BearerToken returns the token of an Authorization header value of the form RFC 6750 defines:
// the scheme "Bearer" (in any case), one or more spaces, and a b64token of at most
// MaxTokenLength bytes, that is one or more of A-Z a-z 0-9 - . _ ~ + / followed by any number of
// "=". Anything else, including tabs, surrounding spaces or a second token, gives "", false.
func BearerToken(header string) (string, bool) {
	const scheme = "bearer"
	if len(header) <= len(scheme) || !asciiEqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", false
	}
	token := header[len(scheme)+1:]
	for len(token) > 0 && token[0] == ' ' {
		token = token[1:]
	}
	if !isB64Token(token) {
		return "", false
	}
	return token, true
}

// isB64Token reports whether s is an RFC 6750 b64token of at most MaxTokenLength bytes.
func isB64Token(s string) bool {
	if len(s) == 0 || len(s) > MaxTokenLength {
		return false
	}
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	if i == 0 {
		return false
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return i == len(s)
}

// isTokenChar reports whether c may appear in a b64token before its trailing "=".
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '~', '+', '/':
		return true
	}
	return false
}

// asciiEqualFold reports whether s equals the lower-case ASCII string lower, ignoring the case
// of ASCII letters only (unlike strings.EqualFold, which folds Unicode too).
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
