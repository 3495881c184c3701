package config

import (
	"strings"
)

// expand replaces variable references in s:
//
//	${VAR}          the value of VAR; an error when VAR is not set (set but empty is fine)
//	${VAR:-text}    the value of VAR, or text when VAR is unset or empty (text is literal)
//	${env:VAR}      the same as ${VAR} (the VS Code / Cursor spelling); ${env:VAR:-text} too
//	$$              a literal $
//
// Any other $ is literal. On failure it returns a message that names the variable but never
// contains a variable's value, so it is safe to show and log.
func expand(s string, lookup func(string) (string, bool)) (string, string) {
	if !strings.Contains(s, "$") {
		return s, ""
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", "unterminated ${ (write $$ for a literal $)"
			}
			val, msg := resolve(s[i+2:i+2+end], lookup)
			if msg != "" {
				return "", msg
			}
			b.WriteString(val)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// resolve returns the value of one reference, the text between "${" and "}".
func resolve(ref string, lookup func(string) (string, bool)) (string, string) {
	name, def, hasDef := strings.Cut(ref, ":-")
	if strings.HasPrefix(name, "input:") {
		return "", "${input:…} variables (VS Code prompts) are not supported; use ${VAR} with an environment variable"
	}
	name = strings.TrimPrefix(name, "env:")
	if !isVarName(name) {
		return "", "invalid variable reference: want ${NAME} or ${NAME:-default}, NAME of letters, digits and _ (write $$ for a literal $)"
	}
	val, ok := lookup(name)
	switch {
	case hasDef && (!ok || val == ""):
		return def, ""
	case !ok:
		return "", "environment variable " + name + " is not set (write ${" + name + ":-} to allow it to be empty)"
	}
	return val, ""
}

// isVarName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func isVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !isNameChar(r) || r == '-' {
			return false
		}
	}
	return true
}
