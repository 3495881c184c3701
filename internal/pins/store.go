package pins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Store keeps a Set. The gateway and `manifold pins` share one, so every change is a
// read-modify-write that Update makes atomic against other writers, in this process and
// others. FileStore keeps it in a file (one instance), SharedStore in the cluster's shared
// store (several replicas).
type Store interface {
	// Load returns the set as stored; an empty set when nothing is stored yet.
	Load(ctx context.Context) (*Set, error)
	// Update loads the set, calls change on it and stores the result, excluding other
	// writers meanwhile. When change returns ErrUnchanged nothing is written and Update
	// returns the set and nil; any other error aborts the update and is returned.
	Update(ctx context.Context, change func(*Set) error) (*Set, error)
}

// ErrUnchanged tells Update that change left the set as it was.
var ErrUnchanged = errors.New("pins: unchanged")

// maxFileBytes bounds the pin file read.
const maxFileBytes = 256 << 20

// FileStore is a Store in one JSON file, written whole to a temporary file in the same
// directory and renamed over it (readers never see half a file), with an advisory lock on
// PATH.lock held around every update, so that the gateway and `manifold pins approve`
// never lose each other's changes. Safe for concurrent use.
type FileStore struct {
	path string
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the store in the file at path, which need not exist yet.
func NewFileStore(path string) *FileStore { return &FileStore{path: path} }

// Path returns the file's path.
func (f *FileStore) Path() string { return f.path }

// Load implements Store.
func (f *FileStore) Load(ctx context.Context) (*Set, error) {
	return f.read()
}

// Update implements Store.
func (f *FileStore) Update(ctx context.Context, change func(*Set) error) (*Set, error) {
	unlock, err := lockFile(f.path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("pins: locking %s: %w", f.path, err)
	}
	defer unlock()
	s, err := f.read()
	if err != nil {
		return nil, err
	}
	if err := change(s); err != nil {
		if errors.Is(err, ErrUnchanged) {
			return s, nil
		}
		return nil, err
	}
	return s, f.write(s)
}

// read parses the file; an absent file is an empty set.
func (f *FileStore) read() (*Set, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewSet(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("pins: %s is larger than %d bytes", f.path, maxFileBytes)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("pins: %s: %w", f.path, err)
	}
	return s, nil
}

// Parse decodes a pin file.
func Parse(data []byte) (*Set, error) {
	s := NewSet()
	if err := json.Unmarshal(data, s); err != nil {
		return nil, err
	}
	if s.Version != SetVersion {
		return nil, fmt.Errorf("version %d: this gateway reads version %d", s.Version, SetVersion)
	}
	if s.Servers == nil {
		s.Servers = map[string]*Server{}
	}
	for name, sv := range s.Servers {
		if sv == nil {
			return nil, fmt.Errorf("server %q: null", name)
		}
		for _, m := range []map[string]*Pin{sv.Tools, sv.Prompts} {
			for item, p := range m {
				if p == nil || (p.Approved == nil && p.Pending == nil) {
					return nil, fmt.Errorf("server %q, %q: a pin needs approved or pending", name, item)
				}
			}
		}
	}
	return s, nil
}

// write replaces the file with s: a temporary file in the same directory, synced, renamed.
func (f *FileStore) write(s *Set) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("pins: encoding: %w", err)
	}
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pins: writing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pins: %w", err)
	}
	return nil
}
