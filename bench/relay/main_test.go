package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRelay sends requests through a relay in each mode to a server that
// answers with a length, chunked with a flush between two events, and 202
// with no body: each answer arrives whole over one kept-alive connection,
// and serve returns once its context ends.
func TestRelay(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "9")
			io.WriteString(w, "length:"+string(body[:2]))
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, "data: two "+string(body)+"\n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer up.Close()
	for _, mode := range []string{"tcp", "http"} {
		t.Run(mode, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				serve(ctx, ln, strings.TrimPrefix(up.URL, "http://"), mode == "http")
			}()
			tr := &http.Transport{MaxConnsPerHost: 1}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for _, c := range []struct{ path, body, want string }{
				{"/length", "ok", "length:ok"},
				{"/stream", "x", "data: one\n\ndata: two x\n\n"},
				{"/none", "", ""},
				{"/length", "ab", "length:ab"},
			} {
				resp, err := client.Post("http://"+ln.Addr().String()+c.path, "text/plain", strings.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != c.want {
					t.Errorf("%s: body %q (%v), want %q", c.path, got, err, c.want)
				}
			}
			tr.CloseIdleConnections()
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not return after its context ended")
			}
		})
	}
}
