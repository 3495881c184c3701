package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// defaultDebounce is how long a Watcher waits after the last file event before it reads the
// file: long enough to see an editor's rename-replace or a ConfigMap swap as one change, short
// enough that a change serves well within a second.
const defaultDebounce = 50 * time.Millisecond

// EmptyHash is the Hash of a config loaded from an empty file. A Watcher never reports an
// empty file (it is an in-place write in progress); a reload that reads one after the
// Watcher reported content has met another write in progress, and can wait for it the same
// way (gateway.Reload does, for the file trigger).
const EmptyHash = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// WatchOptions tunes a Watcher. A nil *WatchOptions, like zero fields, means the defaults.
type WatchOptions struct {
	// Debounce is the quiet time after the last event before the file is read; default 50ms.
	Debounce time.Duration
	// Logger receives watch errors; nil means no logging.
	Logger *zap.Logger
	// checked, in tests, is called after each read of the file with whether a change was
	// reported: what a test waits for instead of a quiet period.
	checked func(reported bool)
}

// Watcher reports changes of one config file's content. It watches the directory holding the
// file, the directory holding the file the path resolves to, and the directory holding each
// symlink the resolution goes through, so that the ways configs are really replaced are all
// seen:
//
//   - in-place writes;
//   - editors that write a new file and rename it over the old one (the inode changes);
//   - the Kubernetes ConfigMap volume, where the file is a symlink through "..data", itself a
//     symlink that is swapped atomically to a new timestamped directory;
//   - a deploy that swaps a symlink anywhere on the way ("current -> releases/vN").
//
// Events are debounced, then the file is read and a change is reported only when its bytes
// differ from the last content seen: touching the file, a chmod, or other files of the same
// directory change nothing. A file that is missing for a moment (between an editor's delete
// and create), or empty (an in-place write that has truncated it and not yet written), is read
// again at the next event.
type Watcher struct {
	path     string
	debounce time.Duration
	log      *zap.Logger
	fw       *fsnotify.Watcher
	changes  chan struct{}
	checked  func(reported bool)
	stop     chan struct{}
	done     chan struct{}

	// Owned by the run goroutine after NewWatcher returns.
	dirs  map[string]bool // directories being watched
	real  string          // the path the file last resolved to
	links map[string]bool // the symlinks resolving the path last went through
	sum   [sha256.Size]byte
}

// NewWatcher starts watching path, whose current content is the baseline: only later changes
// are reported. Close stops it.
func NewWatcher(path string, opts *WatchOptions) (*Watcher, error) {
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.Debounce <= 0 {
		o.Debounce = defaultDebounce
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: watch %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("config: watch: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config: watch %s: %w", path, err)
	}
	w := &Watcher{
		path:     abs,
		debounce: o.Debounce,
		log:      o.Logger.Named("config"),
		fw:       fw,
		changes:  make(chan struct{}, 1),
		checked:  o.checked,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		dirs:     map[string]bool{},
		links:    map[string]bool{},
		sum:      sha256.Sum256(data),
	}
	if err := w.watchDirs(); err != nil {
		fw.Close()
		return nil, fmt.Errorf("config: watch %s: %w", path, err)
	}
	go w.run()
	return w, nil
}

// Changes delivers one value after the file's content changed; changes that happen before the
// value is received are folded into it.
func (w *Watcher) Changes() <-chan struct{} { return w.changes }

// Close stops watching and waits for the watcher's goroutine to end.
func (w *Watcher) Close() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return nil
}

func (w *Watcher) run() {
	defer close(w.done)
	defer w.fw.Close()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if w.relevant(ev.Name) {
				t.Reset(w.debounce)
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.log.Warn("watching the config file", zap.String(logKeySource, w.path), zap.Error(err))
		case <-t.C:
			w.check()
		}
	}
}

// relevant reports whether an event on name can change the file: the file itself, the file
// it resolves to, a symlink on the way, or a ".."-prefixed entry (the ConfigMap volume's
// "..data" swap).
func (w *Watcher) relevant(name string) bool {
	base := filepath.Base(name)
	return base == filepath.Base(w.path) || base == filepath.Base(w.real) || strings.HasPrefix(base, "..") || w.links[name]
}

// check re-resolves the watched directories, reads the file and reports a change of content.
func (w *Watcher) check() {
	if err := w.watchDirs(); err != nil {
		w.log.Warn("watching the config file", zap.String(logKeySource, w.path), zap.Error(err))
	}
	reported := false
	if w.checked != nil {
		defer func() { w.checked(reported) }()
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.log.Warn("reading the config file", zap.String(logKeySource, w.path), zap.Error(err))
		}
		return
	}
	if len(data) == 0 {
		// An in-place write (os.WriteFile, cp, a shell's ">") first truncates the file, then
		// writes it; a writer that pauses between the two for longer than the debounce leaves
		// it empty when it is read. An empty document is a valid config of no servers, so
		// reporting it would stop every upstream until the write completes, and restart them
		// after. It is taken for a write in progress: the write's own event brings the content.
		w.log.Debug("the config file is empty: a write in progress; waiting for its content",
			zap.String(logKeySource, w.path))
		return
	}
	sum := sha256.Sum256(data)
	if sum == w.sum {
		return
	}
	w.sum = sum
	reported = true
	select {
	case w.changes <- struct{}{}:
	default:
	}
}

// watchDirs watches the directory of the path, of the file it resolves to and of each
// symlink on the way, and stops watching directories that no longer lead to it. While the
// path does not resolve (the file it leads to was deleted, and is to be created again), the
// directories it last led through stay watched.
func (w *Watcher) watchDirs() error {
	want := map[string]bool{filepath.Dir(w.path): true}
	if real, err := filepath.EvalSymlinks(w.path); err == nil {
		w.real = real
		w.links = symlinksOf(w.path)
	}
	if w.real != "" {
		want[filepath.Dir(w.real)] = true
	}
	for link := range w.links {
		want[filepath.Dir(link)] = true
	}
	var errs []error
	for dir := range want {
		if !w.dirs[dir] {
			if err := w.fw.Add(dir); err != nil {
				errs = append(errs, err)
				continue
			}
			w.dirs[dir] = true
		}
	}
	for dir := range w.dirs {
		if !want[dir] {
			_ = w.fw.Remove(dir) // fails when the directory is already gone
			delete(w.dirs, dir)
		}
	}
	return errors.Join(errs...)
}

// maxLinkHops bounds the symlinks symlinksOf follows, as the kernel bounds a path's.
const maxLinkHops = 40

// symlinksOf returns the symlinks that resolving path, absolute, goes through: of its
// directories and of itself, and of the paths they lead to, in turn.
func symlinksOf(path string) map[string]bool {
	links := map[string]bool{}
	p := filepath.Clean(path)
	for range maxLinkHops {
		link, rest, ok := firstLink(p)
		if !ok {
			break
		}
		links[link] = true
		target, err := os.Readlink(link)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		p = filepath.Join(target, rest)
	}
	return links
}

// firstLink returns the shortest prefix of p, absolute and clean, that is a symlink, and the
// rest of p after it.
func firstLink(p string) (link, rest string, ok bool) {
	sep := string(filepath.Separator)
	parts := strings.Split(strings.TrimPrefix(p, sep), sep)
	cur := sep
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", "", false
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return cur, filepath.Join(parts[i+1:]...), true
		}
	}
	return "", "", false
}
