package envelope

import (
	"strings"
	"testing"
)

// A typical tools/call (~300 bytes) and one carrying 64 KiB of arguments.
var (
	smallCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"github__search_issues","arguments":{"query":"is:open label:bug repo:manifold-mcp/manifold","sort":"updated","order":"desc","per_page":30,"page":1},"_meta":{"progressToken":"tok-42","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	largeCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"fs__write_file","arguments":{"path":"/tmp/x","content":"` +
		strings.Repeat(`line of text with \"quotes\" and \\ escapes\n`, 64<<10/46) + `"},"_meta":{"progressToken":7}}}`)
)

func benchScan(b *testing.B, msg []byte) {
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Scan(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRewrite(b *testing.B, msg []byte) {
	e, err := Scan(msg)
	if err != nil {
		b.Fatal(err)
	}
	ed := Edit{ID: []byte(`"mf-123"`), Name: "search_issues", SetName: true}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Rewrite(msg, ed); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanSmall(b *testing.B)    { benchScan(b, smallCall) }
func BenchmarkScanLarge(b *testing.B)    { benchScan(b, largeCall) }
func BenchmarkRewriteSmall(b *testing.B) { benchRewrite(b, smallCall) }
func BenchmarkRewriteLarge(b *testing.B) { benchRewrite(b, largeCall) }
