package testutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// JSONLines decodes each line of data (JSON lines, such as an audit log) as
// a JSON object, failing the test on a malformed line.
func JSONLines(t testing.TB, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("malformed JSON line %q: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
