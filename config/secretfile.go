package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretFileBytes caps a secret file: secrets are short, and a wrong path (a log, a device)
// must not be read whole into memory.
const maxSecretFileBytes = 64 << 10

// secretFile reads the secret that the key <section>.<name>File names a file of (path) into
// *secret: a Kubernetes Secret volume or a Docker secret, rather than the file or the
// environment. Trailing line breaks and spaces are dropped (echo and most editors add one);
// the content is never shown. Setting both <name> and <name>File is an error. The file is
// read at every load, so a reload picks up a rotated secret.
func (d *decoder) secretFile(section, name, path string, secret *string) {
	if path == "" {
		return
	}
	key := joinKey(section, name+"File")
	if *secret != "" {
		d.fail(key, "set only one of "+name+" and "+name+"File")
		return
	}
	s, err := readSecretFile(path)
	if err != nil {
		d.fail(key, err.Error())
		return
	}
	*secret = s
}

// readSecretFile returns the content of the secret file at path without trailing whitespace;
// its errors name the problem but neither the path (the key names it) nor the content.
func readSecretFile(path string) (string, error) {
	data, err := readSecretBytes(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(data), " \t\r\n")
	if s == "" {
		return "", errors.New("the file is empty")
	}
	return s, nil
}

// readSecretBytes returns the content of the secret file at path, at most
// maxSecretFileBytes; its errors name neither the path nor the content. The file must be a
// regular file, and that is checked before it is opened: opening a FIFO with no writer would
// block the load, and every reload after it, for good.
func readSecretBytes(path string) ([]byte, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, errors.New(fileProblem(err))
	}
	if !before.Mode().IsRegular() {
		return nil, errors.New("must be a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New(fileProblem(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || !os.SameFile(before, fi) {
		return nil, errors.New("must be a regular file (it changed while it was read)")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	switch {
	case err != nil:
		return nil, errors.New(fileProblem(err))
	case len(data) > maxSecretFileBytes:
		return nil, fmt.Errorf("is larger than %d KiB: not a secret", maxSecretFileBytes>>10)
	}
	return data, nil
}

// secretKey is the key to blame for a secret's value: name, or name+"File" when the secret
// was read from a file.
func secretKey(name, file string) string {
	if file != "" {
		return name + "File"
	}
	return name
}
