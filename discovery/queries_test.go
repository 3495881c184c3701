package discovery

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode"
)

// evalQuery is one query of the evaluation set (testdata/queries.json): a
// request as a client might word it, and the one tool that serves it. A
// paraphrase shares no word with the tool's name (sharesWord).
type evalQuery struct {
	Q          string `json:"q"`
	Want       string `json:"want"`
	Paraphrase bool   `json:"paraphrase"`
}

func loadQueries(t testing.TB) []evalQuery {
	t.Helper()
	return loadQueryFile(t, "testdata/queries.json")
}

// loadHoldout returns the held-out queries (testdata/holdout.json), written
// once the ranker was settled and never used to change it.
func loadHoldout(t testing.TB) []evalQuery {
	t.Helper()
	return loadQueryFile(t, "testdata/holdout.json")
}

func loadQueryFile(t testing.TB, name string) []evalQuery {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var qs []evalQuery
	if err := json.Unmarshal(b, &qs); err != nil {
		t.Fatal(err)
	}
	return qs
}

// plainWords splits s into lower-case words at anything but letters and
// digits, and at lower-to-upper case changes. It is deliberately not the
// index's tokenizer, so that the query set's checks do not depend on the
// ranker.
func plainWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// sharesWord reports whether query and name share a word, strictly: equal
// words, or one a prefix of the other at three letters or more ("env" and
// "environment", "relation" and "relations", "sign" and "signature").
func sharesWord(query, name string) (string, bool) {
	for _, q := range plainWords(query) {
		for _, n := range plainWords(name) {
			short, long := q, n
			if len(short) > len(long) {
				short, long = long, short
			}
			if short == long || (len(short) >= 3 && strings.HasPrefix(long, short)) {
				return q, true
			}
		}
	}
	return "", false
}

// TestQuerySet checks the query set itself: at least 100 queries, each
// naming a tool of the catalog, at least half of them paraphrases that
// share no word with their tool's name.
func TestQuerySet(t *testing.T) {
	qs := loadQueries(t)
	checkQueries(t, qs, 100)
	checkQueries(t, loadHoldout(t), 40)
}

// checkQueries checks one query set: at least minimum queries, each naming
// a tool of the catalog, at least half of them paraphrases sharing no word
// with their tool's name.
func checkQueries(t *testing.T, qs []evalQuery, minimum int) {
	names := map[string]bool{}
	for _, tool := range loadCatalog(t) {
		names[tool.Server+"__"+tool.Name] = true
	}
	paraphrases := 0
	for _, q := range qs {
		if !names[q.Want] {
			t.Errorf("query %q: tool %s is not in the catalog", q.Q, q.Want)
		}
		if q.Paraphrase {
			paraphrases++
			if w, ok := sharesWord(q.Q, q.Want); ok {
				t.Errorf("paraphrase %q shares %q with %s", q.Q, w, q.Want)
			}
		}
	}
	if len(qs) < minimum {
		t.Errorf("%d queries, want at least %d", len(qs), minimum)
	}
	if 2*paraphrases < len(qs) {
		t.Errorf("%d of %d queries are paraphrases, want at least half", paraphrases, len(qs))
	}
	t.Logf("%d queries, %d paraphrases", len(qs), paraphrases)
}
