package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	secretA = []byte("cluster-secret-A-0123456789abcdef0123")
	secretB = []byte("cluster-secret-B-0123456789abcdef0123")
)

func mustKeys(t testing.TB, secret []byte, previous ...[]byte) *Keys {
	t.Helper()
	k, err := NewKeys(secret, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewKeysRefusesShortSecrets(t *testing.T) {
	for _, c := range []struct {
		name     string
		secret   []byte
		previous [][]byte
	}{
		{name: "short secret", secret: []byte("short")},
		{name: "short previous", secret: secretA, previous: [][]byte{[]byte("short")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewKeys(c.secret, c.previous); !errors.Is(err, ErrShortSecret) {
				t.Errorf("NewKeys: %v, want ErrShortSecret", err)
			}
		})
	}
}

func sampleToken() *Token {
	return &Token{Kind: KindSession, Owner: "10.1.2.3:8080", Boot: 42, Expires: time.Now().Add(time.Hour).Truncate(time.Second),
		Principal: PrincipalOf("apikey:alice"), Local: "sdk-id"}
}

func TestTokenRoundTrip(t *testing.T) {
	k := mustKeys(t, secretA)
	want := sampleToken()
	s, err := k.Seal(want)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "alice") || strings.Contains(s, "10.1.2.3") || strings.Contains(s, "sdk-id") {
		t.Errorf("token %q shows its contents", s)
	}
	got, err := k.Open(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != want.Kind || got.Owner != want.Owner || got.Boot != want.Boot || !got.Expires.Equal(want.Expires) ||
		got.Principal != want.Principal || got.Local != want.Local {
		t.Errorf("opened %+v, want %+v", got, *want)
	}
	if s2, _ := k.Seal(want); s2 == s {
		t.Error("two tokens of the same contents are equal: the nonce is not random")
	}
}

// TestTokenRefusals: forged, truncated, altered, expired tokens, and tokens
// of another cluster, do not open, each with its error.
func TestTokenRefusals(t *testing.T) {
	k := mustKeys(t, secretA)
	good, _ := k.Seal(sampleToken())
	expired := sampleToken()
	expired.Expires = time.Now().Add(-time.Second)
	old, _ := k.Seal(expired)
	other, _ := mustKeys(t, secretB).Seal(sampleToken())
	flip := []byte(good)
	if flip[20] == 'A' {
		flip[20] = 'B'
	} else {
		flip[20] = 'A'
	}
	for _, c := range []struct {
		name, token string
		want        error
	}{
		{name: "empty", token: "", want: ErrMalformed},
		{name: "random text", token: "0123456789ABCDEFGHIJKLMNOPQRSTUV", want: ErrMalformed},
		{name: "truncated", token: good[:len(good)-4]}, // malformed or forged, as its last bits fall
		{name: "truncated to the header", token: good[:30], want: ErrMalformed},
		{name: "one character altered", token: string(flip), want: ErrForged},
		{name: "not base64url", token: good[:len(good)-1] + "=", want: ErrMalformed},
		{name: "other cluster's secret", token: other, want: ErrForged},
		{name: "expired", token: old, want: ErrExpired},
		{name: "huge", token: strings.Repeat("A", 5000), want: ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.Open(c.token, time.Now())
			if c.want == nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("Open: %v, want %v", err, c.want)
			}
		})
	}
}

// TestTokenRotation: a cluster whose new secret comes first and whose old
// one is still accepted opens tokens of both and issues under the new one;
// once the old secret is dropped, its tokens no longer open.
func TestTokenRotation(t *testing.T) {
	before := mustKeys(t, secretA)
	during := mustKeys(t, secretB, secretA)
	after := mustKeys(t, secretB)
	oldTok, _ := before.Seal(sampleToken())
	newTok, _ := during.Seal(sampleToken())
	for _, c := range []struct {
		name  string
		keys  *Keys
		token string
		want  error
	}{
		{name: "rotating accepts old", keys: during, token: oldTok},
		{name: "rotating accepts new", keys: during, token: newTok},
		{name: "not yet rotated does not accept new", keys: before, token: newTok, want: ErrForged},
		{name: "rotated accepts new", keys: after, token: newTok},
		{name: "rotated refuses old", keys: after, token: oldTok, want: ErrForged},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.keys.Open(c.token, time.Now()); !errors.Is(err, c.want) {
				t.Errorf("Open: %v, want %v", err, c.want)
			}
		})
	}
}

func TestHop(t *testing.T) {
	k := mustKeys(t, secretA)
	now := time.Now()
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp?x=1", nil)
		r.Header.Set("Mcp-Session-Id", "s1")
		return r
	}
	signed := req()
	signed.Header.Set(HopHeader, k.hopValue(signed, now))
	value := signed.Header.Get(HopHeader)
	for _, c := range []struct {
		name   string
		mutate func(r *http.Request)
		keys   *Keys
		at     time.Time
		want   HopState
	}{
		{name: "none", mutate: func(r *http.Request) {}, want: HopNone},
		{name: "valid", mutate: func(r *http.Request) { r.Header.Set(HopHeader, value) }, want: HopValid},
		{name: "valid under a previous secret", keys: mustKeys(t, secretB, secretA), mutate: func(r *http.Request) { r.Header.Set(HopHeader, value) }, want: HopValid},
		{name: "expired", at: now.Add(time.Minute), mutate: func(r *http.Request) { r.Header.Set(HopHeader, value) }, want: HopInvalid},
		{name: "other session", mutate: func(r *http.Request) { r.Header.Set(HopHeader, value); r.Header.Set("Mcp-Session-Id", "s2") }, want: HopInvalid},
		{name: "other method", mutate: func(r *http.Request) { r.Header.Set(HopHeader, value); r.Method = http.MethodDelete }, want: HopInvalid},
		{name: "forged", mutate: func(r *http.Request) { r.Header.Set(HopHeader, "9999999999999.AAAA") }, want: HopInvalid},
		{name: "garbage", mutate: func(r *http.Request) { r.Header.Set(HopHeader, "x") }, want: HopInvalid},
		{name: "other cluster", keys: mustKeys(t, secretB), mutate: func(r *http.Request) { r.Header.Set(HopHeader, value) }, want: HopInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := req()
			c.mutate(r)
			keys, at := c.keys, c.at
			if keys == nil {
				keys = k
			}
			if at.IsZero() {
				at = now
			}
			if got := keys.Hop(r, at); got != c.want {
				t.Errorf("Hop = %d, want %d", got, c.want)
			}
		})
	}
}

// TestHomeIsStableAndMovesOnlyWhatALostPeerOwned: rendezvous hashing gives
// every replica the same home for a key, spreads keys over the peers, and
// a peer leaving moves only its own keys.
func TestHomeIsStableAndMovesOnlyWhatALostPeerOwned(t *testing.T) {
	peers := []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}
	nodes := make([]*Node, len(peers))
	for i, p := range peers {
		n, err := NewNode(mustKeys(t, secretA), p, &Options{Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	count := map[string]int{}
	homes := map[string]string{}
	for i := range 300 {
		key := fmt.Sprintf("apikey:user-%d", i)
		h := nodes[0].Home(key)
		for _, n := range nodes[1:] {
			if got := n.Home(key); got != h {
				t.Fatalf("replicas disagree on the home of %s: %s and %s", key, h, got)
			}
		}
		count[h]++
		homes[key] = h
	}
	for _, p := range peers {
		if count[p] < 50 {
			t.Errorf("peer %s is home to %d of 300 keys: spread %v", p, count[p], count)
		}
	}
	nodes[0].markDown(peers[2])
	for key, h := range homes {
		got := nodes[0].Home(key)
		if h != peers[2] && got != h {
			t.Errorf("%s moved from %s to %s though its home stayed", key, h, got)
		}
		if got == peers[2] {
			t.Errorf("%s stays on the lost peer", key)
		}
	}
}

type fakeResolver map[string][]string

func (f fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestPeersFromDNS(t *testing.T) {
	n, err := NewNode(mustKeys(t, secretA), "10.0.0.1:8080", &Options{
		PeersDNS: "manifold-headless:8080",
		Resolver: fakeResolver{"manifold-headless": {"10.0.0.1", "10.0.0.7", "10.0.0.9"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	want := "10.0.0.1:8080 10.0.0.7:8080 10.0.0.9:8080"
	for range 1000 {
		if strings.Join(n.Peers(), " ") == want {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("peers %v, want %s", n.Peers(), want)
}

// TestForwardStreamsBothWaysWithAHop: a forwarded request reaches the
// owner with its body, headers and a valid hop header, and the owner's
// event stream reaches the client event by event, before it ends.
func TestForwardStreamsBothWaysWithAHop(t *testing.T) {
	keys := mustKeys(t, secretA)
	release := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if keys.Hop(r, time.Now()) != HopValid || string(body) != "ping" || r.Host != "gateway.example" || r.Header.Get("Mcp-Session-Id") != "s1" {
			http.Error(w, "bad forward", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: two\n\n")
	}))
	defer owner.Close()
	n, err := NewNode(keys, "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Forward(w, r, strings.TrimPrefix(owner.URL, "http://"), func(w http.ResponseWriter) { http.Error(w, "gone", http.StatusNotFound) })
	}))
	defer entry.Close()
	req, _ := http.NewRequest(http.MethodPost, entry.URL+"/mcp", strings.NewReader("ping"))
	req.Host = "gateway.example"
	req.Header.Set("Mcp-Session-Id", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	buf := make([]byte, 64)
	k, _ := io.ReadAtLeast(resp.Body, buf, len("data: one\n\n"))
	if got := string(buf[:k]); got != "data: one\n\n" {
		t.Fatalf("first event %q before the owner wrote the second", got)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: two\n\n" {
		t.Errorf("then %q", rest)
	}
}

// TestForwardIsFullDuplex: the owner may answer before it has read the
// whole request body (an SSE stream whose first event comes before the
// client has sent the rest); the forward carries the rest of the body to
// the owner after the answer has begun, and the answer through to its end.
// Without full duplex, net/http at the entry replica would read the rest
// of the body itself when the answer starts, waiting for a client that
// waits for the answer.
func TestForwardIsFullDuplex(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The owner, too, answers before it has read its body.
		_ = http.NewResponseController(w).EnableFullDuplex()
		first := make([]byte, len("hello "))
		if _, err := io.ReadFull(r.Body, first); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", first)
		w.(http.Flusher).Flush()
		rest, err := io.ReadAll(r.Body)
		if err != nil {
			fmt.Fprintf(w, "data: error %v\n\n", err)
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", rest)
	}))
	defer owner.Close()
	n, err := NewNode(mustKeys(t, secretA), "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Forward(w, r, strings.TrimPrefix(owner.URL, "http://"), func(w http.ResponseWriter) { http.Error(w, "gone", http.StatusNotFound) })
	}))
	defer entry.Close()

	body, send := io.Pipe()
	defer send.Close() // ends a forward left waiting when the test fails
	req, _ := http.NewRequest(http.MethodPost, entry.URL+"/mcp", body)
	answered := make(chan *http.Response, 1)
	failed := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			failed <- err
			return
		}
		answered <- resp
	}()
	if _, err := io.WriteString(send, "hello "); err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	select {
	case resp = <-answered:
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer before the rest of the body was sent: the forward is not full duplex")
	}
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	if line, err := events.ReadString('\n'); err != nil || line != "data: hello \n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	if _, err := io.WriteString(send, "world"); err != nil {
		t.Fatalf("sending the rest of the body after the answer began: %v", err)
	}
	send.Close()
	rest, _ := io.ReadAll(events)
	if got := string(rest); got != "\ndata: world\n\n" {
		t.Errorf("then %q, want the rest of the body echoed", got)
	}
}

// TestForwardToAGoneOwner: an owner nobody listens at gets the gone answer
// and is left out of homes for a while.
func TestForwardToAGoneOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	n, err := NewNode(mustKeys(t, secretA), "127.0.0.1:1", &Options{Peers: []string{dead}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	n.Forward(rec, httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(nil)), dead, func(w http.ResponseWriter) {
		http.Error(w, "session not found", http.StatusNotFound)
	})
	if rec.Code != http.StatusNotFound {
		t.Errorf("status %d, want 404", rec.Code)
	}
	if !n.isDown(dead, time.Now()) {
		t.Error("the unreachable owner is not marked down")
	}
}

// TestConcurrentOpen exercises Open and Home from many goroutines (-race).
func TestConcurrentOpen(t *testing.T) {
	n, _ := NewNode(mustKeys(t, secretA), "127.0.0.1:1", &Options{Peers: []string{"127.0.0.1:2"}})
	tok, _ := n.Issue(KindSession, PrincipalOf("p"), "")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := n.Open(tok); err != nil {
					t.Error(err)
					return
				}
				n.Home("p")
			}
		})
	}
	wg.Wait()
}

func BenchmarkOpen(b *testing.B) {
	for _, c := range []struct {
		name string
		keys *Keys
	}{
		{name: "current", keys: mustKeys(b, secretA)},
		{name: "previous-secret", keys: mustKeys(b, secretB, secretA)},
	} {
		b.Run(c.name, func(b *testing.B) {
			tok, _ := mustKeys(b, secretA).Seal(sampleToken())
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.keys.Open(tok, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSeal(b *testing.B) {
	k := mustKeys(b, secretA)
	t := sampleToken()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Seal(t); err != nil {
			b.Fatal(err)
		}
	}
}

// addTokenSeeds seeds a token parser's fuzzing with good, a token, cut
// short, and tokens of no key.
func addTokenSeeds(f *testing.F, good string) {
	f.Add(good)
	f.Add(good[:40])
	f.Add("")
	f.Add("AQ" + strings.Repeat("A", 80))
}

func FuzzOpen(f *testing.F) {
	k := mustKeys(f, secretA)
	good, _ := k.Seal(sampleToken())
	addTokenSeeds(f, good)
	f.Fuzz(func(t *testing.T, s string) {
		// Only tokens the key sealed open (the seeds, sealed in each
		// fuzzing process): a fuzzer cannot forge one or alter its fields.
		tok, err := k.Open(s, time.Now())
		if err == nil && (tok.Owner != "10.1.2.3:8080" || tok.Local != "sdk-id" || tok.Boot != 42) {
			t.Fatalf("opened %q: %+v", s, tok)
		}
	})
}

func FuzzHop(f *testing.F) {
	k := mustKeys(f, secretA)
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	f.Add(k.hopValue(r, time.Now()))
	f.Add("1.AAAA")
	f.Add(".")
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set(HopHeader, v)
		if k.Hop(r, time.Now()) == HopValid {
			t.Fatalf("hop %q verified for another request", v)
		}
	})
}
