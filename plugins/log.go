package plugins

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// hclogTo returns an hclog logger for go-plugin that writes to log: go-plugin
// logs through it, and relays the plugin's own hclog lines (JSON on its
// stderr) through it at their level.
func hclogTo(log *zap.Logger) hclog.Logger {
	level := hclog.Info
	if log.Core().Enabled(zapcore.DebugLevel) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Output: zapWriter(log), JSONFormat: true, Level: level})
}

// maxLogLine bounds a line of a plugin's output the gateway holds: a longer
// one is handed on in pieces of this size, so output without line breaks
// (a progress bar, binary data, or on purpose) cannot grow the gateway's
// memory.
const maxLogLine = 64 << 10

// lines splits what is written to it into lines of at most maxLogLine bytes
// and hands each to line.
type lines struct {
	line func([]byte)
	mu   sync.Mutex
	buf  []byte
}

func (w *lines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	written := len(p)
	for len(p) > 0 {
		// Take at most what fills the buffer to maxLogLine.
		n := min(len(p), maxLogLine-len(w.buf))
		chunk := p[:n]
		p = p[n:]
		for {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				break
			}
			w.buf = append(w.buf, chunk[:i]...)
			w.line(w.buf)
			w.buf = w.buf[:0]
			chunk = chunk[i+1:]
		}
		w.buf = append(w.buf, chunk...)
		if len(w.buf) == maxLogLine {
			w.line(w.buf)
			w.buf = w.buf[:0]
		}
	}
	return written, nil
}

// zapWriter takes hclog's JSON lines and writes each to log at its
// level, with its fields.
func zapWriter(log *zap.Logger) *lines {
	return &lines{line: func(b []byte) { logHCLine(log, b) }}
}

func logHCLine(log *zap.Logger, b []byte) {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		log.Info(string(b))
		return
	}
	msg, _ := m["@message"].(string)
	lvl, _ := m["@level"].(string)
	fields := make([]zap.Field, 0, len(m))
	for k, v := range m {
		if k == "@message" || k == "@level" || k == "@timestamp" || k == "@module" || k == "@caller" || k == "timestamp" {
			continue
		}
		fields = append(fields, zap.Any(k, v))
	}
	switch lvl {
	case "trace", "debug":
		log.Debug(msg, fields...)
	case "warn":
		log.Warn(msg, fields...)
	case "error":
		log.Error(msg, fields...)
	default:
		log.Info(msg, fields...)
	}
}

// lineWriter logs each line written to it (a plugin's stdout and stderr as
// go-plugin relays them).
func lineWriter(log *zap.Logger, stream string) *lines {
	return &lines{line: func(b []byte) { log.Info(string(b), zap.String("stream", stream)) }}
}
