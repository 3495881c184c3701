package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// watchWait bounds how long a test waits for a change that must come.
const watchWait = 5 * time.Second

// watchQuiet is how long a test watches for a change that must not come.
const watchQuiet = 300 * time.Millisecond

func newTestWatcher(t *testing.T, path string) *Watcher {
	t.Helper()
	w, err := NewWatcher(path, &WatchOptions{Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func expectChange(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changes():
	case <-time.After(watchWait):
		t.Fatalf("%s: no change reported within %v", what, watchWait)
	}
}

func expectQuiet(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changes():
		t.Fatalf("%s: a change was reported", what)
	case <-time.After(watchQuiet):
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestWatcher(t *testing.T) {
	tests := []struct {
		name string
		// setup creates the watched path in dir with content "v1" and returns it; change
		// replaces the content with "v2" the way a user or system would.
		setup  func(t *testing.T, dir string) string
		change func(t *testing.T, dir, path string)
	}{
		{
			name:   "in-place write",
			setup:  plainFile,
			change: func(t *testing.T, _, path string) { writeFile(t, path, "v2") },
		},
		{
			name:  "rename-replace (editors, atomic writers)",
			setup: plainFile,
			change: func(t *testing.T, dir, path string) {
				tmp := filepath.Join(dir, ".config.yaml.swp")
				writeFile(t, tmp, "v2")
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:  "delete then create",
			setup: plainFile,
			change: func(t *testing.T, _, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, "v2")
			},
		},
		{
			name:   "Kubernetes ConfigMap ..data symlink swap",
			setup:  configMap,
			change: func(t *testing.T, dir, _ string) { swapConfigMap(t, dir, "ts2", "v2") },
		},
		{
			name: "symlink to a file in another directory, target written",
			setup: func(t *testing.T, dir string) string {
				other := filepath.Join(dir, "other")
				if err := os.Mkdir(other, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(other, "real.yaml"), "v1")
				link := filepath.Join(dir, "config.yaml")
				if err := os.Symlink(filepath.Join(other, "real.yaml"), link); err != nil {
					t.Fatal(err)
				}
				return link
			},
			change: func(t *testing.T, dir, _ string) { writeFile(t, filepath.Join(dir, "other", "real.yaml"), "v2") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			w := newTestWatcher(t, path)
			tt.change(t, dir, path)
			expectChange(t, w, tt.name)
			if got, err := os.ReadFile(path); err != nil || string(got) != "v2" {
				t.Fatalf("after the change the file reads %q, %v", got, err)
			}
			// A second change is reported too: the watch survived the first.
			writeFile(t, mustEval(t, path), "v3")
			expectChange(t, w, tt.name+", then written again")
		})
	}
}

func TestWatcherIgnoresNonChanges(t *testing.T) {
	dir := t.TempDir()
	path := plainFile(t, dir)
	w := newTestWatcher(t, path)

	writeFile(t, path, "v1") // same bytes
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "unrelated.yaml"), "x")
	expectQuiet(t, w, "same content, touch, and another file")

	writeFile(t, path, "v2")
	expectChange(t, w, "real change after the non-changes")
}

func TestWatcherConfigMapRepeatedSwaps(t *testing.T) {
	dir := t.TempDir()
	path := configMap(t, dir)
	w := newTestWatcher(t, path)
	for i, ts := range []string{"ts2", "ts3", "ts4"} {
		swapConfigMap(t, dir, ts, "v"+ts)
		expectChange(t, w, "swap "+ts)
		if got, _ := os.ReadFile(path); string(got) != "v"+ts {
			t.Fatalf("swap %d: file reads %q", i, got)
		}
	}
}

func TestWatcherMissingFile(t *testing.T) {
	if _, err := NewWatcher(filepath.Join(t.TempDir(), "absent.yaml"), nil); err == nil {
		t.Fatal("NewWatcher of a missing file: no error")
	}
}

func plainFile(t *testing.T, dir string) string {
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, "v1")
	return path
}

// configMap lays dir out as kubelet does for a ConfigMap volume:
//
//	config.yaml -> ..data/config.yaml
//	..data      -> ..ts1
//	..ts1/config.yaml
func configMap(t *testing.T, dir string) string {
	ts := filepath.Join(dir, "..ts1")
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ts, "config.yaml"), "v1")
	if err := os.Symlink("..ts1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// swapConfigMap updates a configMap directory the way kubelet does: a new timestamped
// directory, a "..data_tmp" symlink to it renamed over "..data", the old directory removed.
func swapConfigMap(t *testing.T, dir, ts, content string) {
	old, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".."+ts), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".."+ts, "config.yaml"), content)
	if err := os.Symlink(".."+ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
		t.Fatal(err)
	}
}

func mustEval(t *testing.T, path string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// TestWatcherWaitsOutAnInPlaceWrite: an in-place write truncates the file before it writes
// it. A writer that pauses in between (on a loaded machine) leaves the file empty when the
// debounce has passed; that empty document, a valid config of no servers, must not be
// reported, or a reload would stop every upstream until the content arrives and then start
// them again.
func TestWatcherWaitsOutAnInPlaceWrite(t *testing.T) {
	path := plainFile(t, t.TempDir())
	checks := make(chan bool, 16)
	w, err := NewWatcher(path, &WatchOptions{Debounce: 5 * time.Millisecond, checked: func(reported bool) { checks <- reported }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	nextCheck := func(what string) bool {
		t.Helper()
		select {
		case reported := <-checks:
			return reported
		case <-time.After(watchWait):
			t.Fatalf("%s: the watcher did not read the file within %v", what, watchWait)
			return false
		}
	}
	// write truncates the file, waits until the watcher has read it empty, then writes
	// content; it returns whether a read of the written file reported a change.
	write := func(content string) bool {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if nextCheck("truncated") {
			t.Fatalf("writing %q: the truncated (empty) file was reported as a change", content)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return nextCheck("written")
	}

	if !write("v2") {
		t.Fatal("the written content was not reported")
	}
	expectChange(t, w, "in-place write with a pause")
	if write("v2") {
		t.Fatal("the same bytes, written again with a pause, were reported as a change")
	}
}

func TestEmptyHashIsTheHashOfAnEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	writeFile(t, path, "")
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hash != EmptyHash {
		t.Fatalf("Hash of an empty file = %s, EmptyHash = %s", cfg.Hash, EmptyHash)
	}
}

// TestWatcherSeesASymlinkSwappedOnTheWay: a config path that resolves through a symlink in a
// third directory (a "current -> releases/vN" deploy): swapping that symlink atomically (ln
// -sfn: rename over it) changes what the path reads, in a directory that neither holds the
// path nor the file it resolves to. Before, that directory was not watched.
func TestWatcherSeesASymlinkSwappedOnTheWay(t *testing.T) {
	root := t.TempDir()
	etc := filepath.Join(root, "etc")
	opt := filepath.Join(root, "opt")
	v1 := filepath.Join(opt, "releases", "v1")
	v2 := filepath.Join(opt, "releases", "v2")
	for _, d := range []string{etc, v1, v2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(v1, "config.yaml"), "v1")
	writeFile(t, filepath.Join(v2, "config.yaml"), "v2")
	current := filepath.Join(opt, "current")
	if err := os.Symlink(v1, current); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(etc, "config.yaml")
	if err := os.Symlink(filepath.Join(current, "config.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w := newTestWatcher(t, path)

	// ln -sfn v2 current, atomically.
	tmp := filepath.Join(opt, ".current.tmp")
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, current); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "v2" {
		t.Fatalf("setup: path reads %q", got)
	}
	expectChange(t, w, "swap of an intermediate symlink")
}

// TestWatcherSeesASymlinkTargetDeletedThenCreated: a config path that is a symlink to a file
// in another directory, whose target is replaced by delete-then-create (an editor without
// rename, a config-management tool) with a pause longer than the debounce. Before, the check
// after the delete could not resolve the symlink and stopped watching the target's
// directory, so the create that followed was never seen.
func TestWatcherSeesASymlinkTargetDeletedThenCreated(t *testing.T) {
	root := t.TempDir()
	etc, data := filepath.Join(root, "etc"), filepath.Join(root, "data")
	for _, d := range []string{etc, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(data, "manifold.yaml")
	writeFile(t, target, "v1")
	path := filepath.Join(etc, "config.yaml")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	checked := make(chan bool, 16)
	w, err := NewWatcher(path, &WatchOptions{Debounce: 20 * time.Millisecond, checked: func(r bool) { checked <- r }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	select {
	case <-checked: // the watcher has looked at the missing file
	case <-time.After(watchWait):
		t.Fatal("no check after the delete")
	}
	writeFile(t, target, "v2")
	expectChange(t, w, "symlink target deleted, then created")
}
