package namespacing_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifold-mcp/manifold/namespacing"
)

func TestMerge(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name           string
		sources        []namespacing.Source
		opts           namespacing.Options
		wantOrdered    []namespacing.Entry
		wantCollisions []*namespacing.Collision
	}{
		{
			name: "no sources",
		},
		{
			name: "disjoint servers",
			sources: []namespacing.Source{
				{Server: "weather", Prefix: "weather", Names: []string{"forecast", "alerts.list"}},
				{Server: "everything", Prefix: "everything", Names: []string{"echo"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "everything__echo", Server: "everything", Original: "echo"},
				{Exposed: "weather__alerts_list", Server: "weather", Original: "alerts.list"},
				{Exposed: "weather__forecast", Server: "weather", Original: "forecast"},
			},
		},
		{
			name: "same tool on two servers is no collision",
			sources: []namespacing.Source{
				{Server: "a", Prefix: "a", Names: []string{"x"}},
				{Server: "b", Prefix: "b", Names: []string{"x"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "a__x", Server: "a", Original: "x"},
				{Exposed: "b__x", Server: "b", Original: "x"},
			},
		},
		{
			name: "custom prefix and empty prefix",
			sources: []namespacing.Source{
				{Server: "github-enterprise", Prefix: "gh", Names: []string{"repos/list"}},
				{Server: "local", Prefix: "", Names: []string{"echo", "read.file"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "echo", Server: "local", Original: "echo"},
				{Exposed: "gh__repos_list", Server: "github-enterprise", Original: "repos/list"},
				{Exposed: "read_file", Server: "local", Original: "read.file"},
			},
		},
		{
			name: "duplicates within a source are silent",
			sources: []namespacing.Source{
				{Server: "a", Prefix: "a", Names: []string{"x", "y", "x", "x"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "a__x", Server: "a", Original: "x"},
				{Exposed: "a__y", Server: "a", Original: "y"},
			},
		},
		{
			name: "a.b and a_b collide within a server",
			sources: []namespacing.Source{
				{Server: "s", Prefix: "s", Names: []string{"a_b", "a.b"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "s__a_b", Server: "s", Original: "a.b"},
			},
			wantCollisions: []*namespacing.Collision{{
				Exposed: "s__a_b",
				Kept:    namespacing.Entry{Exposed: "s__a_b", Server: "s", Original: "a.b"},
				Dropped: namespacing.Entry{Exposed: "s__a_b", Server: "s", Original: "a_b"},
			}},
		},
		{
			name: "collision across servers: first server by name wins",
			sources: []namespacing.Source{
				{Server: "b", Prefix: "b", Names: []string{"x"}},
				{Server: "a", Prefix: "", Names: []string{"b__x"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: "b__x", Server: "a", Original: "b__x"},
			},
			wantCollisions: []*namespacing.Collision{{
				Exposed: "b__x",
				Kept:    namespacing.Entry{Exposed: "b__x", Server: "a", Original: "b__x"},
				Dropped: namespacing.Entry{Exposed: "b__x", Server: "b", Original: "x"},
			}},
		},
		{
			name: "two servers sharing a prefix",
			sources: []namespacing.Source{
				{Server: "two", Prefix: "p", Names: []string{"x", "only2"}},
				{Server: "one", Prefix: "p", Names: []string{"x"}},
			},
			opts: namespacing.Options{Kind: "prompt"},
			wantOrdered: []namespacing.Entry{
				{Exposed: "p__only2", Server: "two", Original: "only2"},
				{Exposed: "p__x", Server: "one", Original: "x"},
			},
			wantCollisions: []*namespacing.Collision{{
				Exposed: "p__x",
				Kept:    namespacing.Entry{Exposed: "p__x", Server: "one", Original: "x"},
				Dropped: namespacing.Entry{Exposed: "p__x", Server: "two", Original: "x"},
				Kind:    "prompt",
			}},
		},
		{
			name: "long names sharing a beginning do not collide",
			sources: []namespacing.Source{
				{Server: "s", Prefix: "s", Names: []string{long + ".a", long + ".b"}},
			},
			wantOrdered: []namespacing.Entry{
				{Exposed: namespacing.Name("s", long+".a", namespacing.Options{}), Server: "s", Original: long + ".a"},
				{Exposed: namespacing.Name("s", long+".b", namespacing.Options{}), Server: "s", Original: long + ".b"},
			},
		},
		{
			name: "custom separator and max length",
			sources: []namespacing.Source{
				{Server: "srv", Prefix: "srv", Names: []string{"tool", "a_very_long_tool_name"}},
			},
			opts: namespacing.Options{Separator: "-", MaxLength: 16},
			wantOrdered: []namespacing.Entry{
				{Exposed: "srv-a_v_d8ce98a9", Server: "srv", Original: "a_very_long_tool_name"},
				{Exposed: "srv-tool", Server: "srv", Original: "tool"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneSources(tt.sources)
			table, ordered, collisions := namespacing.Merge(tt.sources, tt.opts)
			if diff := cmp.Diff(tt.wantOrdered, ordered, cmpEmpty); diff != "" {
				t.Errorf("ordered (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCollisions, collisions); diff != "" {
				t.Errorf("collisions (-want +got):\n%s", diff)
			}
			wantTable := map[string]namespacing.Entry{}
			for _, e := range tt.wantOrdered {
				wantTable[e.Exposed] = e
			}
			if diff := cmp.Diff(wantTable, table); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.sources); diff != "" {
				t.Errorf("Merge modified its input (-before +after):\n%s", diff)
			}

			// Deterministic whatever the order of sources and names.
			shuffled := cloneSources(tt.sources)
			slices.Reverse(shuffled)
			for _, s := range shuffled {
				slices.Reverse(s.Names)
			}
			table2, ordered2, collisions2 := namespacing.Merge(shuffled, tt.opts)
			if diff := cmp.Diff(table, table2); diff != "" {
				t.Errorf("table depends on input order (-first +reversed):\n%s", diff)
			}
			if diff := cmp.Diff(ordered, ordered2); diff != "" {
				t.Errorf("ordered depends on input order (-first +reversed):\n%s", diff)
			}
			if diff := cmp.Diff(collisions, collisions2); diff != "" {
				t.Errorf("collisions depend on input order (-first +reversed):\n%s", diff)
			}
		})
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Comparer(func(a, b []namespacing.Entry) bool {
	return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
})

func cloneSources(in []namespacing.Source) []namespacing.Source {
	out := slices.Clone(in)
	for i := range out {
		out[i].Names = slices.Clone(out[i].Names)
	}
	return out
}

func TestCollisionError(t *testing.T) {
	tests := []struct {
		name string
		c    *namespacing.Collision
		want string
	}{
		{
			name: "tool by default",
			c: &namespacing.Collision{
				Exposed: "a__x",
				Kept:    namespacing.Entry{Exposed: "a__x", Server: "a", Original: "x"},
				Dropped: namespacing.Entry{Exposed: "a__x", Server: "b", Original: "x"},
			},
			want: `name "a__x" from server "b" (tool "x") collides with server "a" (tool "x"); dropped`,
		},
		{
			name: "prompt",
			c: &namespacing.Collision{
				Exposed: "s__a_b",
				Kept:    namespacing.Entry{Exposed: "s__a_b", Server: "s", Original: "a.b"},
				Dropped: namespacing.Entry{Exposed: "s__a_b", Server: "s", Original: "a_b"},
				Kind:    "prompt",
			},
			want: `name "s__a_b" from server "s" (prompt "a_b") collides with server "s" (prompt "a.b"); dropped`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = tt.c
			if got := err.Error(); got != tt.want {
				t.Errorf("Error() = %s\nwant      %s", got, tt.want)
			}
		})
	}
}

// benchSources returns 10 sources of 1,000 names each, a third of which need mapping.
func benchSources() []namespacing.Source {
	sources := make([]namespacing.Source, 10)
	for s := range sources {
		server := fmt.Sprintf("server-%02d", 9-s)
		names := make([]string, 1000)
		for i := range names {
			switch i % 3 {
			case 0:
				names[i] = fmt.Sprintf("tool_%04d", (i*7919)%1000)
			case 1:
				names[i] = fmt.Sprintf("files/read.%04d", (i*7919)%1000)
			default:
				names[i] = fmt.Sprintf("a_rather_long_tool_name_that_describes_what_it_does_%04d", (i*7919)%1000)
			}
		}
		sources[s] = namespacing.Source{Server: server, Prefix: server, Names: names}
	}
	return sources
}

func BenchmarkMerge(b *testing.B) {
	sources := benchSources()
	b.ReportAllocs()
	for b.Loop() {
		_, ordered, collisions := namespacing.Merge(sources, namespacing.Options{})
		if len(ordered) != 10_000 || len(collisions) != 0 {
			b.Fatalf("got %d entries, %d collisions", len(ordered), len(collisions))
		}
	}
}
