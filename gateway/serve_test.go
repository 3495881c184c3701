package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeTLSAndDrain: Serve speaks TLS when configured, and on shutdown
// lets a call in flight finish before closing sessions.
func TestServeTLSAndDrain(t *testing.T) {
	certFile, keyFile, pool := testutil.SelfSigned(t, t.TempDir())
	gw := newAlphaGateway(t, func(c *config.Config) {
		c.Gateway.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "https://" + ln.Addr().String() + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 500}})
		called <- err
	}()
	// The call is in flight: the upstream has it (at most 10 s). The
	// gateway's own count would not do: the client's notifications/initialized
	// POST may be what it counts.
	up := gw.pool.members["alpha"].up
	for deadline := time.Now().Add(10 * time.Second); up.InFlight() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the gateway within 10 s")
		}
	}
	stop()
	if err := <-called; err != nil {
		t.Errorf("call in flight during shutdown: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
}
