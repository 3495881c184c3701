package namespacing_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/namespacing"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func TestName(t *testing.T) {
	a61, a62 := strings.Repeat("a", 61), strings.Repeat("a", 62)
	b64, b65 := strings.Repeat("b", 64), strings.Repeat("b", 65)
	e70 := strings.Repeat("é", 70)
	tests := []struct {
		name   string
		prefix string
		in     string
		opts   namespacing.Options
		want   string
	}{
		{name: "prefixed", prefix: "everything", in: "echo", want: "everything__echo"},
		{name: "empty prefix", prefix: "", in: "echo", want: "echo"},
		{name: "empty prefix keeps hyphen", prefix: "", in: "get-weather", want: "get-weather"},
		{name: "dots", prefix: "fs", in: "read.file", want: "fs__read_file"},
		{name: "slashes", prefix: "gh", in: "repos/list", want: "gh__repos_list"},
		{name: "colons", prefix: "k8s", in: "pods:list", want: "k8s__pods_list"},
		{name: "spaces", prefix: "w", in: "get weather now", want: "w__get_weather_now"},
		{name: "two-byte rune is one underscore", prefix: "x", in: "café", want: "x__caf_"},
		{name: "three-byte runes", prefix: "x", in: "日本", want: "x____"},
		{name: "four-byte rune", prefix: "x", in: "ok🙂", want: "x__ok_"},
		{name: "invalid utf-8 byte", prefix: "", in: "a\xffb", want: "a_b"},
		{name: "prefix is mapped too", prefix: "my.server", in: "t", want: "my_server__t"},
		{name: "empty name with prefix", prefix: "p", in: "", want: "p__"},
		{name: "empty everything", prefix: "", in: "", want: "_"},
		{name: "only unsafe", prefix: "", in: "...", want: "___"},
		{name: "exactly 64", prefix: "p", in: a61, want: "p__" + a61},
		{name: "65 is shortened", prefix: "p", in: a62, want: "p__" + strings.Repeat("a", 52) + "_c54168a8"},
		{name: "unprefixed exactly 64", prefix: "", in: b64, want: b64},
		{name: "unprefixed 65 is shortened", prefix: "", in: b65, want: strings.Repeat("b", 55) + "_74b128f3"},
		{name: "long unicode hashes the unmapped text", prefix: "", in: e70, want: strings.Repeat("_", 55) + "_78dcf717"},
		{
			name:   "realistic long name",
			prefix: "github",
			in:     "repos/manifold-mcp/manifold/issues/comments.create_or_update",
			want:   "github__repos_manifold-mcp_manifold_issues_comments_cre_8ea077db",
		},
		{name: "custom separator", prefix: "a", in: "b", opts: namespacing.Options{Separator: "-"}, want: "a-b"},
		{name: "unsafe separator is mapped", prefix: "a", in: "b", opts: namespacing.Options{Separator: "."}, want: "a_b"},
		{name: "separator unused without prefix", prefix: "", in: "b", opts: namespacing.Options{Separator: "::"}, want: "b"},
		{
			name: "custom max length", prefix: "server", in: "a_long_tool_name_here",
			opts: namespacing.Options{MaxLength: 20}, want: "server__a_l_f5eb2df0",
		},
		{
			name: "max length below minimum is raised", prefix: "server", in: "a_long_tool_name_here",
			opts: namespacing.Options{MaxLength: 5}, want: "server__f5eb2df0",
		},
		{name: "negative max length means default", prefix: "p", in: a61, opts: namespacing.Options{MaxLength: -1}, want: "p__" + a61},
		{name: "larger max length", prefix: "p", in: a62, opts: namespacing.Options{MaxLength: 65}, want: "p__" + a62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := namespacing.Name(tt.prefix, tt.in, tt.opts)
			if got != tt.want {
				t.Errorf("Name(%q, %q, %+v) = %q, want %q", tt.prefix, tt.in, tt.opts, got, tt.want)
			}
			if !validName.MatchString(got) {
				t.Errorf("Name(%q, %q) = %q: not a valid name", tt.prefix, tt.in, got)
			}
			if again := namespacing.Name(tt.prefix, tt.in, tt.opts); again != got {
				t.Errorf("Name is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestNameLongNamesSharingABeginningDiffer(t *testing.T) {
	common := strings.Repeat("x", 70)
	a := namespacing.Name("p", common+"a", namespacing.Options{})
	b := namespacing.Name("p", common+"b", namespacing.Options{})
	if a == b {
		t.Errorf("both shorten to %q", a)
	}
	if len(a) != 64 || len(b) != 64 {
		t.Errorf("lengths %d and %d, want 64", len(a), len(b))
	}
}

func TestNameAllocs(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		in     string
		want   float64
	}{
		{name: "valid unprefixed", prefix: "", in: "echo", want: 0},
		{name: "prefixed", prefix: "everything", in: "echo", want: 1},
		{name: "mapped", prefix: "fs", in: "read.file", want: 1},
		{name: "shortened", prefix: "github", in: strings.Repeat("issue.", 20), want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testing.AllocsPerRun(100, func() { namespacing.Name(tt.prefix, tt.in, namespacing.Options{}) })
			if got != tt.want {
				t.Errorf("allocs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    namespacing.Options
		wantErr []string
	}{
		{name: "zero", opts: namespacing.Options{}},
		{name: "custom", opts: namespacing.Options{Separator: "-", MaxLength: 60}},
		{name: "minimum", opts: namespacing.Options{MaxLength: namespacing.MinMaxLength}},
		{name: "too small", opts: namespacing.Options{MaxLength: 15}, wantErr: []string{"max length 15"}},
		{name: "negative", opts: namespacing.Options{MaxLength: -1}, wantErr: []string{"max length -1"}},
		{name: "bad separator", opts: namespacing.Options{Separator: "."}, wantErr: []string{`separator "."`}},
		{
			name:    "all problems at once",
			opts:    namespacing.Options{Separator: "::", MaxLength: 3},
			wantErr: []string{"max length 3", `separator "::"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if (err != nil) != (len(tt.wantErr) > 0) {
				t.Fatalf("Validate() = %v, want errors %q", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func FuzzName(f *testing.F) {
	f.Add("everything", "echo", "", 64)
	f.Add("", "", "", 16)
	f.Add("my.server", "read/file:now", "__", 20)
	f.Add("x", strings.Repeat("é", 100), ".", 128)
	f.Add("", "a\xff\xfeb", "-", 17)
	f.Fuzz(func(t *testing.T, prefix, name, sep string, maxLen int) {
		if maxLen < 0 {
			maxLen = -(maxLen + 1)
		}
		maxLen = namespacing.MinMaxLength + maxLen%(128-namespacing.MinMaxLength+1)
		opts := namespacing.Options{Separator: sep, MaxLength: maxLen}
		got := namespacing.Name(prefix, name, opts)
		if len(got) < 1 || len(got) > maxLen || !validName.MatchString(got) {
			t.Fatalf("Name(%q, %q, %+v) = %q (length %d)", prefix, name, opts, got, len(got))
		}
		if again := namespacing.Name(prefix, name, opts); again != got {
			t.Fatalf("Name(%q, %q, %+v) not deterministic: %q then %q", prefix, name, opts, got, again)
		}
		if prefix == "" && len(name) <= maxLen && namespacing.ValidPrefix(name) && got != name {
			t.Fatalf("Name(%q, %q) = %q, want the name unchanged", prefix, name, got)
		}
	})
}

func BenchmarkName(b *testing.B) {
	benchmarks := []struct {
		name   string
		prefix string
		in     string
	}{
		{name: "unprefixed valid", prefix: "", in: "get_weather"},
		{name: "prefixed", prefix: "everything", in: "get_weather"},
		{name: "mapped", prefix: "fs", in: "files/read.text"},
		{name: "shortened", prefix: "github", in: "repos/manifold-mcp/manifold/issues/comments.create_or_update"},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				namespacing.Name(bm.prefix, bm.in, namespacing.Options{})
			}
		})
	}
}
