package plugins

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeList feeds decodeList what an untrusted plugin may answer to
// list_post: it must never panic, and whatever it accepts is made only of
// items it was given (or renames of them), each once.
func FuzzDecodeList(f *testing.F) {
	f.Add([]byte(`[{"name":"a"},{"name":"x"}]`), "x", "b")
	f.Add([]byte(`[{"name":"a"}]`), "a", "b")
	f.Add([]byte(`[{"name":"a"},{"name":"a"}]`), "", "")
	f.Add([]byte(`[{"uri":1}]`), "c", "a")
	f.Add([]byte(`{}`), "", "")
	in := []ListItem{{Key: "a", Raw: json.RawMessage(`{"name":"a"}`)}, {Key: "b", Raw: json.RawMessage(`{"name":"b"}`)}}
	rest := []ListItem{{Key: "c"}}
	f.Fuzz(func(t *testing.T, payload []byte, newName, from string) {
		renames := map[string]string{}
		if newName != "" {
			renames[newName] = from
		}
		out, kept, err := decodeList("name", in, rest, payload, renames)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, it := range out {
			orig := it.Key
			if o, ok := kept[it.Key]; ok {
				orig = o
				if it.Key == "a" || it.Key == "b" || it.Key == "c" {
					t.Fatalf("rename onto a listed name %q accepted", it.Key)
				}
			}
			if orig != "a" && orig != "b" {
				t.Fatalf("item %q (from %q) was never listed", it.Key, orig)
			}
			if seen[it.Key] {
				t.Fatalf("item %q twice", it.Key)
			}
			seen[it.Key] = true
		}
	})
}
