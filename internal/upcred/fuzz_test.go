package upcred

import (
	"bytes"
	"testing"
)

// FuzzFileStoreOpen: whatever a store file holds (it is read from disk,
// where anything may have written it), opening it returns records or an
// error and never panics; an error never quotes the content; and what seal
// writes opens to the same records.
func FuzzFileStoreOpen(f *testing.F) {
	s, err := NewFileStore("unused", secret)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := s.seal(records{"alice": {"github": {AccessToken: "at-1", RefreshToken: "rt-1"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add([]byte(`{"version":1,"nonce":"AAAAAAAAAAAAAAAA","ciphertext":""}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := s.open(data)
		if err != nil {
			if len(data) > 8 && bytes.Contains([]byte(err.Error()), data) {
				t.Fatalf("the error quotes the file: %v", err)
			}
			return
		}
		again, err := s.seal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.open(again); err != nil {
			t.Fatalf("sealed records do not open: %v", err)
		}
	})
}
