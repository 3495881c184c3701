package upcred

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLegacyMetadata: the root's authorization server metadata of an origin without root
// protected resource metadata gets the root as its issuer (2025-03-26); with protected
// resource metadata, or at any other path, every document passes unchanged.
func TestLegacyMetadata(t *testing.T) {
	prmStatus := http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case prmRootPath:
			w.WriteHeader(prmStatus)
			_, _ = w.Write([]byte(`{}`))
		default:
			_, _ = w.Write([]byte(`{"issuer":"` + "http://" + r.Host + `/oauth","token_endpoint":"x"}`))
		}
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &legacyMetadata{base: http.DefaultTransport}}
	issuer := func(path string) string {
		t.Helper()
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var doc struct{ Issuer string }
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %s", path, b)
		}
		return doc.Issuer
	}
	tests := []struct {
		name     string
		prm      int
		path     string
		wantRoot bool
		checkPRM bool
	}{
		{"no metadata of the resource: the root's document names the root", http.StatusNotFound, asmRootPath, true, true},
		{"another path is unchanged", http.StatusNotFound, asmRootPath + "/oauth", false, true},
		{"with metadata of the resource, unchanged", http.StatusOK, asmRootPath, false, true},
		{"without a look at the resource's metadata, unchanged", http.StatusOK, asmRootPath, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prmStatus = tt.prm
			if tt.checkPRM {
				resp, err := hc.Get(srv.URL + prmRootPath)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			got := issuer(tt.path)
			if (got == srv.URL) != tt.wantRoot {
				t.Fatalf("issuer %q (root %s), want rewritten %v", got, srv.URL, tt.wantRoot)
			}
		})
	}
}
