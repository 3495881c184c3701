package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
)

// seqs returns the sequence numbers of entries.
func seqs(entries []Entry) []uint64 {
	var out []uint64
	for _, e := range entries {
		out = append(out, e.Seq)
	}
	return out
}

func TestRingKeepsTheLatestNewestFirst(t *testing.T) {
	r := NewRing(3)
	for i := range 5 {
		r.Add(&Record{Name: fmt.Sprint("t", i), Arguments: json.RawMessage(`{"secret":"x"}`)})
	}
	got := r.Recent(Filter{}, 0)
	if diff := cmp.Diff([]uint64{5, 4, 3}, seqs(got)); diff != "" {
		t.Fatalf("seqs (-want +got):\n%s", diff)
	}
	if got[0].Name != "t4" || got[2].Name != "t2" {
		t.Errorf("names %q … %q, want t4 … t2", got[0].Name, got[2].Name)
	}
	for _, e := range got {
		if e.Arguments != nil {
			t.Errorf("record %d kept its arguments", e.Seq)
		}
	}
	if r.Total() != 5 {
		t.Errorf("Total = %d, want 5", r.Total())
	}
	if diff := cmp.Diff([]uint64{5, 4}, seqs(r.Recent(Filter{}, 2))); diff != "" {
		t.Errorf("limit 2 (-want +got):\n%s", diff)
	}
}

func TestRingFilter(t *testing.T) {
	r := NewRing(10)
	r.Add(&Record{Principal: "alice", Server: "alpha", Name: "alpha__echo", Decision: DecisionAllow, Outcome: OutcomeOK})
	r.Add(&Record{Principal: "bob", Server: "alpha", Name: "alpha__delete_all", Decision: DecisionDeny, Outcome: OutcomeError})
	r.Add(&Record{Principal: "bob", Server: "beta", Name: "beta__echo", Decision: DecisionAllow, Outcome: OutcomeToolError})
	tests := []struct {
		name string
		f    Filter
		want []uint64
	}{
		{name: "everything", f: Filter{}, want: []uint64{3, 2, 1}},
		{name: "principal", f: Filter{Principal: "bob"}, want: []uint64{3, 2}},
		{name: "server", f: Filter{Server: "alpha"}, want: []uint64{2, 1}},
		{name: "name contains", f: Filter{Name: "echo"}, want: []uint64{3, 1}},
		{name: "denied", f: Filter{Outcome: DecisionDeny}, want: []uint64{2}},
		{name: "tool error", f: Filter{Outcome: OutcomeToolError}, want: []uint64{3}},
		{name: "all fields", f: Filter{Principal: "bob", Server: "alpha", Name: "delete", Outcome: OutcomeError}, want: []uint64{2}},
		{name: "no match", f: Filter{Principal: "carol"}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, seqs(r.Recent(tc.f, 0))); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNilRingKeepsNothing(t *testing.T) {
	var r *Ring
	r.Add(&Record{})
	if r.Recent(Filter{}, 0) != nil || r.Total() != 0 {
		t.Error("a nil Ring kept a record")
	}
}

// TestLogFillsRing: the writer goroutine adds every record it takes from the queue to the
// ring, as it writes it to the sinks.
func TestLogFillsRing(t *testing.T) {
	ring := NewRing(10)
	var out bytes.Buffer
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsNone}, &Options{Stdout: &out, LookupEnv: noEnv, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(&Record{Method: "tools/call", Name: "a__x", Principal: "bob", Decision: DecisionDeny, Outcome: OutcomeError})
	l.Write(&Record{Method: "tools/call", Name: "a__y", Principal: "bob", Decision: DecisionAllow, Outcome: OutcomeOK})
	closeLog(t, l)
	got := ring.Recent(Filter{}, 0)
	if len(got) != 2 || got[0].Name != "a__y" || got[1].Name != "a__x" {
		t.Fatalf("ring holds %+v, want a__y then a__x", got)
	}
	if len(lines(t, out.String())) != 2 {
		t.Errorf("stdout has %q, want 2 lines", out.String())
	}
}

// TestRingAddAllocatesNothing: keeping a record's line costs the audit writer no allocation,
// so the console adds none per call (BenchmarkCallTool/audited/console=on), and the line kept
// has no arguments.
func TestRingAddAllocatesNothing(t *testing.T) {
	r := NewRing(4)
	ln := []byte(`{"time":"2026-11-24T10:00:00Z","duration_ms":1.5,"method":"tools/call","principal":"bob","name":"alpha__echo","decision":"allow","outcome":"ok","result_bytes":3,"arguments":{"secret":"s3cr3t","n":[1,{"x":"}"}]}}` + "\n")
	for range 8 { // fill it, so that it overwrites as in steady state
		r.addLine(ln)
	}
	if n := testing.AllocsPerRun(1000, func() { r.addLine(ln) }); n != 0 {
		t.Errorf("addLine allocates %v times", n)
	}
	got := r.Recent(Filter{}, 1)
	if len(got) != 1 || got[0].Name != "alpha__echo" || got[0].Duration != 1500*time.Microsecond {
		t.Fatalf("Recent = %+v", got)
	}
	for _, s := range r.slots {
		if bytes.Contains(s.line, []byte("s3cr3t")) || bytes.Contains(s.line, []byte("arguments")) {
			t.Fatalf("a kept line holds the arguments: %s", s.line)
		}
	}
}

// BenchmarkRingAdd is what the console's ring adds to the audit writer's work per record.
func BenchmarkRingAdd(b *testing.B) {
	r := NewRing(0)
	rec := &Record{Method: "tools/call", Name: "alpha__echo", Principal: "bob", Groups: []string{"dev"}, Outcome: OutcomeOK}
	b.ReportAllocs()
	ln, _ := json.Marshal(&line{Record: rec})
	for b.Loop() {
		r.addLine(ln)
	}
}
