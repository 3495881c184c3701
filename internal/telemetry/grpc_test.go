package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/manifold-mcp/manifold/config"
)

// grpcReceiver is an in-process OTLP/gRPC trace receiver.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu     sync.Mutex
	names  []string
	tenant []string
}

func (r *grpcReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tenant = md.Get("x-tenant")
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestSpansExportedOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := &grpcReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, rcv)
	go srv.Serve(ln)
	defer srv.Stop()

	tel, err := New(context.Background(), &config.Telemetry{Traces: &config.Traces{
		Endpoint: "http://" + ln.Addr().String(), Protocol: config.ProtocolGRPC, Headers: map[string]string{"X-Tenant": "t2"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.StartServer(context.Background(), SpanInfo{Method: "prompts/get", Target: "greet"})
	EndSpan(span, "")
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.names) != 1 || rcv.names[0] != "prompts/get greet" {
		t.Errorf("received spans %v, want [prompts/get greet]", rcv.names)
	}
	if len(rcv.tenant) != 1 || rcv.tenant[0] != "t2" {
		t.Errorf("x-tenant metadata = %v", rcv.tenant)
	}
}
