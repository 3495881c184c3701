// Package audit writes Manifold's audit log: one JSON line per tools/call, prompts/get and
// resources/read, and per denial, to a size-rotated file and/or standard output, as the
// "audit" config section says. Recording never blocks the call path: [Log.Write] queues the
// record for a single writer goroutine and drops it, counting, when the queue is full.
//
// Arguments are recorded in full (with redaction), as a keyed hash, or not at all; see
// [config.Audit]. A nil *Log is valid and records nothing, so callers need no checks.
package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/manifold-mcp/manifold/config"
)

// HashKeyEnv names the environment variable holding the HMAC key of hashed arguments when
// config.Audit.HashKey is empty.
const HashKeyEnv = "MANIFOLD_AUDIT_HASH_KEY"

// Defaults used for zero fields of a config.Audit built in code.
const (
	defaultBuffer     = 4096
	defaultMaxSizeMB  = 100
	defaultMaxBackups = 5
)

const (
	// flushBytes is the size at which the writer writes out a batch even while more records
	// are queued. Batches end on line boundaries, so rotation never splits a record.
	flushBytes = 64 << 10
	// dropReportInterval is the least time between two log entries about dropped records.
	dropReportInterval = 10 * time.Second
)

// Log field keys.
const (
	logKeyDropped = "dropped"
	logKeyTotal   = "total"
	logKeySink    = "sink"
	logKeyError   = "error"
	logKeyPanic   = "panic"
)

// Options tunes a Log. A nil *Options, like zero fields, means the defaults.
type Options struct {
	// Logger receives the Log's own problems: dropped records (at most once per 10s, with the
	// count), write errors, and the warning about a random hash key. Nil logs nothing.
	Logger *zap.Logger
	// Stdout is where config.Audit.Stdout writes; nil means os.Stdout. The Log never closes it.
	Stdout io.Writer
	// LookupEnv reads HashKeyEnv; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Now fills in Record.Time when it is zero; nil means time.Now.
	Now func() time.Time
	// Ring, when set, also keeps each record in memory, added by the writer goroutine as it
	// takes the record from the queue (so, like the sinks, off the call path). Nil: none.
	Ring *Ring

	// reportEvery replaces dropReportInterval in tests.
	reportEvery time.Duration
}

// Log is an audit log. Its methods are safe for concurrent use, and on a nil *Log they do
// nothing. It owns two goroutines, both stopped by Close: the writer, and a reporter that
// logs drops even while the writer is stuck in a slow sink. (With a file, lumberjack adds a
// third, parked for good: natefinch/lumberjack#56. Keep a Log across reloads that leave the
// audit section unchanged.)
type Log struct {
	log  *zap.Logger
	now  func() time.Time
	args *arguments

	sinks []sink
	file  *lumberjack.Logger // nil without a file sink
	ring  *Ring              // nil: none

	// mu guards closed against the close of queue: Write holds it for reading while it sends.
	mu     sync.RWMutex
	closed bool
	queue  chan *Record

	dropped      atomic.Uint64
	reportEvery  time.Duration
	lastReported uint64    // reporter goroutine only
	lastErrLog   time.Time // writer goroutine only: write errors are logged once per reportEvery

	abort     chan struct{} // closed when Close stops waiting: drop what is left
	abortOnce sync.Once
	done      chan struct{} // closed when the writer goroutine has exited
	closeErr  error         // set by the writer goroutine before done is closed
	reported  chan struct{} // closed when the reporter goroutine has exited, after done
}

// sink is one destination of the records.
type sink struct {
	name string
	w    io.Writer
}

// New returns a Log writing as cfg says, with its goroutines started, or nil and no error
// when cfg is nil (no audit log). cfg is expected to be valid (config.Validate); New
// still refuses what it cannot work with: an unknown arguments mode, a hash key that is too
// short, an audit file whose directory does not exist or that cannot be opened.
//
// In hashed mode the HMAC key is cfg.HashKey, else the HashKeyEnv variable, else 32 random
// bytes for this process only, which is logged as a warning: a hash without a secret key
// could be reversed by trying likely values, so plain SHA-256 is never used.
func New(cfg *config.Audit, opts *Options) (*Log, error) {
	if cfg == nil {
		return nil, nil
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.reportEvery <= 0 {
		o.reportEvery = dropReportInterval
	}
	l := &Log{
		log:         o.Logger.Named("audit"),
		now:         o.Now,
		ring:        o.Ring,
		reportEvery: o.reportEvery,
		abort:       make(chan struct{}),
		done:        make(chan struct{}),
		reported:    make(chan struct{}),
	}

	mode := cfg.Arguments
	switch mode {
	case "":
		mode = config.ArgumentsHashed
	case config.ArgumentsFull, config.ArgumentsHashed, config.ArgumentsNone:
	default:
		return nil, fmt.Errorf("audit: unknown arguments mode %q: want full, hashed or none", mode)
	}
	if cfg.File == "" && !cfg.Stdout {
		return nil, errors.New("audit: audit needs file or stdout")
	}
	var key []byte
	if mode == config.ArgumentsHashed {
		var err error
		if key, err = l.hashKey(cfg.HashKey, o.LookupEnv); err != nil {
			return nil, err
		}
	}
	l.args = newArguments(mode, key, cfg.Redact)
	if cfg.File != "" { // last: it creates the file
		if err := openFile(cfg, l); err != nil {
			return nil, err
		}
	}
	if cfg.Stdout {
		l.sinks = append(l.sinks, sink{name: "stdout", w: o.Stdout})
	}

	l.queue = make(chan *Record, orDefault(cfg.Buffer, defaultBuffer))
	go l.run()
	go l.report()
	return l, nil
}

// hashKey returns the HMAC key: configured, from the environment, or random (with a warning).
func (l *Log) hashKey(configured string, lookup func(string) (string, bool)) ([]byte, error) {
	key, source := configured, "audit.hashKey"
	if key == "" {
		key, _ = lookup(HashKeyEnv)
		source = HashKeyEnv
	}
	if key != "" {
		if len(key) < config.MinAuditHashKeyLength {
			return nil, fmt.Errorf("audit: %s is too short: a hash key needs at least %d bytes", source, config.MinAuditHashKeyLength)
		}
		return []byte(key), nil
	}
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return nil, fmt.Errorf("audit: random hash key: %w", err)
	}
	l.log.Warn("audit arguments are hashed with a random key of this process: hashes cannot be compared " +
		"across restarts or replicas; set audit.hashKey or " + HashKeyEnv + " to a secret of at least 32 bytes")
	return random, nil
}

// openFile sets up the rotated file sink, opening (or creating, mode 0600) the file now so
// that a problem is reported by New rather than lost later.
func openFile(cfg *config.Audit, l *Log) error {
	dir := filepath.Dir(cfg.File)
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("audit: directory %s of the audit file does not exist", dir)
	case err != nil:
		return fmt.Errorf("audit: directory of the audit file: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("audit: %s is not a directory", dir)
	}
	if fi, err := os.Stat(cfg.File); err == nil && fi.IsDir() {
		return fmt.Errorf("audit: %s is a directory", cfg.File)
	}
	// Known issue (natefinch/lumberjack#56): each lumberjack.Logger starts a goroutine that
	// Close does not stop; it stays parked on a channel receive. Keep a Log across reloads
	// when the audit section is unchanged.
	f := &lumberjack.Logger{
		Filename:   cfg.File,
		MaxSize:    orDefault(cfg.MaxSizeMB, defaultMaxSizeMB),
		MaxBackups: orDefault(cfg.MaxBackups, defaultMaxBackups),
	}
	if _, err := f.Write(nil); err != nil {
		return fmt.Errorf("audit: open %s: %w", cfg.File, err)
	}
	l.file = f
	l.sinks = append(l.sinks, sink{name: "file", w: f})
	return nil
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Write queues rec to be written and returns at once. When the queue is full, or after Close,
// rec is dropped and counted (see Dropped). Write takes ownership of rec: the caller must not
// modify it, or the slices and maps it refers to (Groups, Arguments), afterwards. A zero
// rec.Time is set to the current time.
func (l *Log) Write(rec *Record) {
	if l == nil || rec == nil {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = l.now()
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.dropped.Add(1)
		return
	}
	select {
	case l.queue <- rec:
	default:
		l.dropped.Add(1)
	}
}

// Ring returns the Ring given in Options.Ring, or nil.
func (l *Log) Ring() *Ring {
	if l == nil {
		return nil
	}
	return l.ring
}

// Dropped returns the number of records lost so far: dropped because the queue was full or
// the Log closed, or not written because a sink failed.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Close stops accepting records, writes those still queued, closes the file and stops the
// writer goroutine. If ctx ends first, Close returns its error; the writer then drops what is
// left and exits as soon as its current write returns (a sink that blocks forever, such as a
// standard output nobody reads, keeps it until then). Close may be called more than once.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	select {
	case <-l.reported:
		return l.closeErr
	case <-ctx.Done():
		l.abortOnce.Do(func() { close(l.abort) })
		return fmt.Errorf("audit: close: %w (queued records are dropped)", ctx.Err())
	}
}

// run is the writer goroutine: it encodes queued records into batches of lines and writes
// each batch once the queue is empty or the batch is large.
func (l *Log) run() {
	defer close(l.done)
	var batch bytes.Buffer
	enc := json.NewEncoder(&batch)
	enc.SetEscapeHTML(false)
	pending := 0 // records in batch
	for rec := range l.queue {
		if l.aborted() {
			l.dropped.Add(uint64(1 + pending))
			for range l.queue {
				l.dropped.Add(1)
			}
			l.closeFile()
			return
		}
		before := batch.Len()
		if l.encode(enc, rec) {
			pending++
			l.ring.addLine(batch.Bytes()[before:])
		}
		if len(l.queue) == 0 || batch.Len() >= flushBytes {
			l.flush(&batch, pending)
			pending = 0
		}
	}
	l.flush(&batch, pending)
	l.closeFile()
}

// report is the reporter goroutine: it logs drops every reportEvery, and a last time once
// the writer has exited.
func (l *Log) report() {
	defer close(l.reported)
	ticker := time.NewTicker(l.reportEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			l.reportDrops()
		case <-l.done:
			l.reportDrops()
			return
		}
	}
}

func (l *Log) aborted() bool {
	select {
	case <-l.abort:
		return true
	default:
		return false
	}
}

// closeFile closes the file sink, if any; the writer goroutine's last act.
func (l *Log) closeFile() {
	if l.file != nil {
		l.closeErr = l.file.Close()
	}
}

// encode appends rec as one JSON line to the batch enc writes to, and reports whether it did.
// A record that cannot be encoded (a panic included) is dropped, counted and logged.
func (l *Log) encode(enc *json.Encoder, rec *Record) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			l.dropped.Add(1)
			l.log.Error("audit record encoding panicked", zap.Any(logKeyPanic, r))
			ok = false
		}
	}()
	ln := line{Time: rec.Time.UTC(), DurationMS: millis(rec.Duration), Record: rec}
	args, err := l.args.encode(rec.Arguments)
	switch {
	case errors.Is(err, errInvalidArguments):
		ln.ArgumentsError = err.Error()
	case err != nil:
		ln.ArgumentsError = "cannot be recorded"
		l.log.Warn("audit record arguments cannot be recorded", zap.Error(err))
	default:
		ln.Arguments = args
	}
	if err := enc.Encode(&ln); err != nil {
		l.dropped.Add(1)
		l.log.Error("audit record cannot be encoded", zap.Error(err))
		return false
	}
	return true
}

// flush writes the batch of n records to every sink and empties it. Records that a sink
// failed to take count as dropped, once however many sinks failed.
func (l *Log) flush(batch *bytes.Buffer, n int) {
	if batch.Len() == 0 {
		return
	}
	failed := false
	for _, s := range l.sinks {
		if err := writeSafely(s.w, batch.Bytes()); err != nil {
			failed = true
			if now := time.Now(); now.Sub(l.lastErrLog) >= l.reportEvery {
				l.lastErrLog = now
				l.log.Error("audit records not written", zap.String(logKeySink, s.name), zap.String(logKeyError, err.Error()))
			}
		}
	}
	if failed {
		l.dropped.Add(uint64(n))
	}
	batch.Reset()
	if batch.Cap() > 4*flushBytes {
		*batch = bytes.Buffer{} // do not keep the memory of one huge record
	}
}

// writeSafely writes p to w, turning a panic in w into an error: a broken sink must not take
// the process down.
func writeSafely(w io.Writer, p []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the sink panicked: %v", r)
		}
	}()
	_, err = w.Write(p)
	return err
}

// reportDrops logs the records dropped since the last report, if any.
func (l *Log) reportDrops() {
	total := l.dropped.Load()
	if total == l.lastReported {
		return
	}
	l.log.Warn("audit records dropped", zap.Uint64(logKeyDropped, total-l.lastReported), zap.Uint64(logKeyTotal, total))
	l.lastReported = total
}
