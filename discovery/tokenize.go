package discovery

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what a query may cost: text past maxQueryBytes is ignored, as
// are words past maxTerms and the part of a word past maxTermBytes.
const (
	maxQueryBytes = 1024
	maxTerms      = 32
	maxTermBytes  = 64
)

// words calls emit with each word of s, lower-cased: runs of letters and
// digits, split also where a lower-case letter is followed by an upper-case
// one ("getSum" → "get", "sum"), so that names in snake_case, kebab-case
// and camelCase split alike. Words longer than maxTermBytes are cut.
func words(s string, emit func(string)) {
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			emit(b.String())
			b.Reset()
		}
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		default:
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush()
			}
			if b.Len()+utf8.RuneLen(r) <= maxTermBytes {
				b.WriteRune(unicode.ToLower(r))
			}
		}
		prev = r
	}
	flush()
}

// stopWords carry no meaning for ranking.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "on": true, "for": true,
	"and": true, "or": true, "is": true, "are": true, "be": true, "by": true, "with": true,
	"it": true, "its": true, "this": true, "that": true, "from": true, "as": true, "at": true,
	"my": true, "me": true, "our": true, "we": true, "i": true, "you": true, "your": true,
	"can": true, "do": true, "does": true, "what": true, "which": true, "who": true, "how": true,
	"there": true, "their": true, "they": true, "them": true, "so": true, "not": true, "no": true,
	"but": true, "into": true, "s": true, "please": true, "tool": true,
}

// stem reduces a lower-case word to a light stem: plural and verb endings
// removed ("entries" → "entry", "indexes" → "index", "created" and
// "creating" → "creat", "running" → "run"), enough for a query's word to
// meet the same word in a name or description. It is not a full stemmer
// on purpose: the names and descriptions of tools are short, and a heavier
// stemmer conflates more than it helps.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"),
		strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "uses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = undouble(w[:len(w)-2])
	}
	if len(w) > 4 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// undouble turns a doubled final consonant into one ("runn" → "run").
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && strings.IndexByte("aeiouls", w[n-1]) < 0 {
		return w[:n-1]
	}
	return w
}

// terms returns the stems of the words of s, stop words left out.
func terms(s string, emit func(string)) {
	words(s, func(w string) {
		if !stopWords[w] {
			emit(stem(w))
		}
	})
}
