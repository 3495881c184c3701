package loadgen

import (
	"os"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	tests := []struct {
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{stat: "42 (manifold) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 7 0 0", want: 2810 * time.Millisecond},
		{stat: "7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0", want: 70 * time.Millisecond},
		{stat: "7 (x) R 1 7", wantErr: true},
		{stat: "7 x R", wantErr: true},
		{stat: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 -3 4 0", wantErr: true},
	}
	for _, tt := range tests {
		got, err := statCPU([]byte(tt.stat))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("statCPU(%q) = %v, %v; want %v, error %v", tt.stat, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestProcessCPU: this process's CPU time grows while it computes.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1 << 20 {
			x ^= i
		}
		now, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now >= before+2*clockTick {
			return
		}
	}
	t.Fatalf("CPU time did not grow in 10 s of computing (%d)", x)
}
