package plugins

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestPluginLogLinesReachZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	l := hclogTo(log)
	l.Warn("disk almost full", "free", 3)
	w := lineWriter(log, "stderr")
	w.Write([]byte("partial "))
	w.Write([]byte("line\nnext"))

	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("entries = %+v", got)
	}
	if got[0].Level != zapcore.WarnLevel || got[0].Message != "disk almost full" || got[0].ContextMap()["free"] != float64(3) {
		t.Errorf("hclog line = %+v %v", got[0].Entry, got[0].ContextMap())
	}
	if got[1].Message != "partial line" || got[1].ContextMap()["stream"] != "stderr" {
		t.Errorf("stderr line = %+v %v", got[1].Entry, got[1].ContextMap())
	}
}

// TestLinesAreBounded: lines splits what it is given into its lines, in whatever pieces they
// come, and hands on a line longer than maxLogLine in pieces of that size; output without a
// line break (64 MiB here) never grows what it holds past maxLogLine.
func TestLinesAreBounded(t *testing.T) {
	var got []int
	w := &lines{line: func(b []byte) { got = append(got, len(b)) }}
	for _, p := range []string{"ab", "c\nde\n", strings.Repeat("x", maxLogLine+10) + "\n"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v; want %d", n, err, len(p))
		}
	}
	if want := []int{3, 2, maxLogLine, 10}; !slices.Equal(got, want) {
		t.Errorf("lines of %v bytes, want %v", got, want)
	}
	got = nil
	chunk := bytes.Repeat([]byte("y"), 1<<20)
	for range 64 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if len(w.buf) > maxLogLine {
			t.Fatalf("holds %d bytes of an unterminated line", len(w.buf))
		}
	}
	if len(got) != 64<<20/maxLogLine {
		t.Errorf("%d pieces of a 64 MiB line, want %d", len(got), 64<<20/maxLogLine)
	}
}
