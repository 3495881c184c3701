package plugins

import (
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
