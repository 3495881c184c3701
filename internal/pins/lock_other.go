//go:build !unix

package pins

import "sync"

// processLock stands in for flock where there is none: it excludes writers of this process
// only.
var processLock sync.Mutex

// lockFile locks out the other writers of this process; path is not used.
func lockFile(string) (unlock func(), err error) {
	processLock.Lock()
	return processLock.Unlock, nil
}
