package testutil

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an in-process OTLP/HTTP trace receiver (a collector's
// /v1/traces endpoint, protobuf encoding) on 127.0.0.1, closed when the test
// ends. Its methods are safe for concurrent use.
type OTLPReceiver struct {
	// URL is the receiver's base URL, such as http://127.0.0.1:41234; spans
	// go to URL + "/v1/traces".
	URL string

	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
	headers  http.Header
}

// NewOTLPReceiver starts a receiver.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected "+req.URL.Path, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.headers = req.Header.Clone()
	for _, rs := range msg.ResourceSpans {
		r.resource = AttrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Received returns the spans received so far, the resource attributes and
// the headers of the last export.
func (r *OTLPReceiver) Received() ([]*tracepb.Span, map[string]string, http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), r.resource, r.headers
}

// AttrMap returns the string values of OTLP attributes by key (other types
// as their empty string).
func AttrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.GetValue().GetStringValue()
	}
	return m
}
