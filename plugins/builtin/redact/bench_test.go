package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// cleanText is text as tools return it, with the near misses that cost
// detectors time: dates, versions, addresses, numbers, key: value lines,
// URLs and `@`s that are not addresses.
const cleanText = "2024-01-15T10:00:00Z INFO server started on 192.168.1.10:8080 (v1.26.3)\n" +
	"func main() { x := map[string]int{\"a\": 1}; fmt.Println(x) } // see https://go.dev/doc\n" +
	"order 4155550123 shipped: 3 items, total 1,234.56 EUR; tracking id 9f8e7d6c5b4a\n" +
	"max_tokens: 4096, temperature: 0.7, model = \"gpt-x\", npm i @scope/pkg react@18.2.0\n"

// findingsText adds one finding of several kinds to cleanText.
const findingsText = cleanText + "contact alice@example.com or +1 415 555 0123, key AKIAIOSFODNN7EXAMPLE\n"

// toolResult is a tools/call result of about size bytes of text.
func toolResult(b *testing.B, text string, size int) []byte {
	b.Helper()
	s := strings.Repeat(text, size/len(text)+1)[:size]
	raw, err := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": s}}, "isError": false})
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func benchJSON(b *testing.B, text string, size int) {
	r, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	raw := toolResult(b, text, size)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.JSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSON1KiBClean(b *testing.B)     { benchJSON(b, cleanText, 1<<10) }
func BenchmarkJSON1KiBFindings(b *testing.B)  { benchJSON(b, findingsText, 1<<10) }
func BenchmarkJSON64KiBClean(b *testing.B)    { benchJSON(b, cleanText, 64<<10) }
func BenchmarkJSON64KiBFindings(b *testing.B) { benchJSON(b, findingsText, 64<<10) }
