package upcred

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/manifold-mcp/manifold/config"
)

// fileVersion is the version of the store file's envelope.
const fileVersion = 1

// storeKeyInfo separates the store's key from anything else derived from the same secret.
const storeKeyInfo = "manifold upstream token store v1"

// maxStoreBytes bounds how much of a store file is read.
const maxStoreBytes = 64 << 20

// envelope is the store file: the whole content, every principal and server name included,
// sealed with AES-256-GCM, so that the file holds no plaintext.
type envelope struct {
	Version    int    `json:"version"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// FileStore is a Store in one encrypted file, for one gateway instance; `manifold auth` edits
// the same file, and the gateway sees the change at its next read (it stats the file before
// using what it read last). Writes replace the file atomically (a temporary file renamed over
// it) under an advisory lock on path+".lock".
type FileStore struct {
	path   string
	sealer *sealer

	mu     sync.Mutex
	cached records
	info   fs.FileInfo // of the file cached was read from; nil: nothing cached
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the store in the file at path (created at the first write), sealed
// with a key derived from secret (HKDF-SHA256), which must be at least 32 bytes.
func NewFileStore(path string, secret []byte) (*FileStore, error) {
	sl, err := newSealer(secret)
	if err != nil {
		return nil, err
	}
	return &FileStore{path: path, sealer: sl}, nil
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, principal, server string) (*Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.load()
	if err != nil {
		return nil, err
	}
	t, ok := r.get(principal, server)
	if !ok {
		return nil, fmt.Errorf("server %q: %w", server, ErrNotFound)
	}
	return cloneToken(t), nil
}

// Put implements Store.
func (s *FileStore) Put(_ context.Context, principal, server string, t *Token) error {
	return s.update(func(r records) int { r.put(principal, server, cloneToken(t)); return 1 })
}

// Revoke implements Store.
func (s *FileStore) Revoke(_ context.Context, principal, server string) (int, error) {
	var n int
	err := s.update(func(r records) int { n = r.revoke(principal, server); return n })
	return n, err
}

// List implements Store.
func (s *FileStore) List(_ context.Context, principal string) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.load()
	if err != nil {
		return nil, err
	}
	return r.list(principal), nil
}

// load returns the file's records, read again only when the file changed since the last
// read. s.mu is held.
func (s *FileStore) load() (records, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.cached, s.info = records{}, nil
		return s.cached, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	if s.info != nil && os.SameFile(s.info, fi) && s.info.ModTime().Equal(fi.ModTime()) && s.info.Size() == fi.Size() {
		return s.cached, nil
	}
	data, err := readLimited(s.path)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	r, err := s.open(data)
	if err != nil {
		return nil, err
	}
	s.cached, s.info = r, fi
	return r, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStoreBytes+1))
	if err == nil && len(data) > maxStoreBytes {
		err = errors.New("file too large")
	}
	return data, err
}

// open decrypts a store file's content.
func (s *FileStore) open(data []byte) (records, error) {
	plain, err := s.sealer.open(data, "the file")
	if err != nil {
		return nil, err
	}
	r := records{}
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, errors.New("token store: the decrypted content is malformed")
	}
	return r, nil
}

// seal encrypts records into a store file's content.
func (s *FileStore) seal(r records) ([]byte, error) {
	plain, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return s.sealer.seal(plain)
}

// update applies change to the current records under the file lock and writes them back when
// change reports a change (a count above 0).
func (s *FileStore) update(change func(records) int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	defer unlock()
	r, err := s.load()
	if err != nil {
		return err
	}
	if change(r) == 0 {
		return nil
	}
	data, err := s.seal(r)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.path, data); err != nil {
		s.info = nil // read again next time
		return fmt.Errorf("token store: %w", err)
	}
	if fi, err := os.Stat(s.path); err == nil {
		s.info = fi
	} else {
		s.info = nil
	}
	return nil
}

// lockFile takes an exclusive advisory lock on path, creating it; the returned function
// releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// writeAtomic replaces path with data: a temporary file in the same directory, written,
// synced and renamed over it, then the directory synced. Readers see the old file or the
// new one, never a part.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// OpenStore returns the store cfg configures: a FileStore when cfg.File is set (its secret
// from cfg.Secret or the file cfg.SecretFile, surrounding white space dropped), else a new
// MemoryStore. The cluster's shared store (cfg.Store) is OpenSharedStore's.
func OpenStore(cfg config.TokenStore) (Store, error) {
	if cfg.File == "" {
		return &MemoryStore{}, nil
	}
	secret, err := storeSecret(cfg)
	if err != nil {
		return nil, err
	}
	return NewFileStore(cfg.File, secret)
}

// storeSecret returns cfg's secret: Secret, or SecretFile's content without surrounding
// white space.
func storeSecret(cfg config.TokenStore) ([]byte, error) {
	if cfg.SecretFile == "" {
		return []byte(cfg.Secret), nil
	}
	b, err := os.ReadFile(cfg.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("gateway.tokenStore.secretFile: %w", err)
	}
	return bytes.TrimSpace(b), nil
}
