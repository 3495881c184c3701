package guard

import "testing"

func benchCheck(b *testing.B, tool, args string) {
	g, err := New([]byte(testConfig))
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(args)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Check(tool, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckAllowed is a call every rule looks at and lets pass.
func BenchmarkCheckAllowed(b *testing.B) {
	benchCheck(b, "files__read", `{"path":"docs/guide/getting-started.md","encoding":"utf-8","limit":4096}`)
}

// BenchmarkCheckBlocked is a call the first rule blocks.
func BenchmarkCheckBlocked(b *testing.B) {
	benchCheck(b, "files__read", `{"path":"../../etc/passwd"}`)
}

// BenchmarkCheckURL is a call checked against the URL allow-list.
func BenchmarkCheckURL(b *testing.B) {
	benchCheck(b, "web__fetch", `{"url":"https://api.example.org/v1/items?page=2","headers":{"Accept":"application/json"}}`)
}

// BenchmarkCheckUncovered is a call to a tool that only a rule about
// another argument applies to: the walk, with nothing to test.
func BenchmarkCheckUncovered(b *testing.B) {
	benchCheck(b, "git__status", `{"repo":"/src/manifold","short":true}`)
}
