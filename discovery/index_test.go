package discovery

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: "everything__get-sum", want: []string{"everything", "get", "sum"}},
		{in: "getTinyImage", want: []string{"get", "tiny", "image"}},
		{in: "HTTPServer v2", want: []string{"httpserver", "v2"}},
		{in: "  ¿Dónde está?  ", want: []string{"dónde", "está"}},
		{in: "", want: nil},
		{in: "__--..", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got []string
			words(tt.in, func(w string) { got = append(got, w) })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("words(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestStemJoinsForms(t *testing.T) {
	groups := [][]string{
		{"create", "creates", "created", "creating"},
		{"entry", "entries"},
		{"index", "indexes"},
		{"run", "running"},
		{"status", "statuses"},
		{"message", "messages"},
		{"policy", "policies"},
		{"search", "searches", "searching"},
	}
	for _, g := range groups {
		want := stem(g[0])
		for _, w := range g[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q) = %q, want %q as for %q", w, got, want, g[0])
			}
		}
	}
}

func TestSearchRanksAndFilters(t *testing.T) {
	ix := New([]Doc{
		{Name: "mail__send_message", Title: "Send message", Description: "Sends an email."},
		{Name: "chat__post_message", Title: "Post message", Description: "Posts to a channel."},
		{Name: "everything__echo", Title: "Echo", Description: "Echoes back the input string"},
	})
	names := func(hits []Hit) []int {
		var out []int
		for _, h := range hits {
			out = append(out, h.Doc)
		}
		return out
	}
	tests := []struct {
		name  string
		query string
		k     int
		keep  func(int) bool
		want  []int
	}{
		{name: "name words rank first", query: "echo the input", k: 3, want: []int{2}},
		{name: "a synonym finds the tool", query: "repeat what I say", k: 3, want: []int{2}},
		{name: "both messages, the email first", query: "email message", k: 3, want: []int{0, 1}},
		{name: "k bounds the hits", query: "message", k: 1, want: []int{0}},
		{name: "keep filters", query: "message", k: 3, keep: func(d int) bool { return d != 0 }, want: []int{1}},
		{name: "stop words only match nothing", query: "the of a", k: 3, want: nil},
		{name: "k zero", query: "message", k: 0, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(ix.Search(ParseQuery(tt.query), tt.k, tt.keep))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Search(%q) (-want +got):\n%s", tt.query, diff)
			}
		})
	}
}

func TestParseQueryBounds(t *testing.T) {
	long := strings.Repeat("word", 100) + " " + strings.Repeat("x ", 2000)
	q := ParseQuery(long)
	if len(q.Terms) > maxTerms {
		t.Errorf("%d terms, want at most %d", len(q.Terms), maxTerms)
	}
	for _, term := range q.Terms {
		if len(term) > maxTermBytes {
			t.Errorf("term of %d bytes, want at most %d", len(term), maxTermBytes)
		}
	}
	if got := ParseQuery("Deleting  DELETED delete"); !slices.Equal(got.Terms, []string{"delet"}) {
		t.Errorf("forms of one word: terms %v, want [delet]", got.Terms)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "repeat my text back", "get-sum__x", "¿Dónde?", "time off", strings.Repeat("a ", 600), "\xff\xfe"} {
		f.Add(s)
	}
	ix := New([]Doc{{Name: "a__b", Title: "B", Description: "Does b."}, {Name: "c", Description: "time off"}})
	f.Fuzz(func(t *testing.T, s string) {
		q := ParseQuery(s)
		if len(q.Terms) > maxTerms {
			t.Fatalf("%d terms", len(q.Terms))
		}
		seen := map[string]bool{}
		for _, term := range q.Terms {
			if term == "" || len(term) > maxTermBytes || seen[term] {
				t.Fatalf("term %q (len %d, repeated %v)", term, len(term), seen[term])
			}
			if utf8.ValidString(s) && !utf8.ValidString(term) {
				t.Fatalf("term %q of valid input is not valid UTF-8", term)
			}
			seen[term] = true
		}
		for _, g := range q.Related {
			for _, term := range g {
				if seen[term] {
					t.Fatalf("related %q is also a term", term)
				}
			}
		}
		hits := ix.Search(q, 5, nil)
		for i := 1; i < len(hits); i++ {
			if better(hits[i], hits[i-1]) {
				t.Fatalf("hits out of order: %v", hits)
			}
		}
	})
}

// BenchmarkSearch measures one search over the evaluation catalog (1,045
// tools), the query parsed each time, as the gateway does.
func BenchmarkSearch(b *testing.B) {
	ix, _ := catalogIndex(b)
	qs := loadQueries(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ix.Search(ParseQuery(qs[i%len(qs)].Q), 10, nil)
	}
}

// BenchmarkBuild measures building the index of the evaluation catalog,
// which the gateway does when its catalog changes.
func BenchmarkBuild(b *testing.B) {
	cat := loadCatalog(b)
	docs := make([]Doc, len(cat))
	for i, tool := range cat {
		docs[i] = Doc{Name: tool.Server + "__" + tool.Name, Title: tool.Title, Description: tool.Description}
	}
	b.ReportAllocs()
	for b.Loop() {
		New(docs)
	}
}
