package config

import "context"

// Follow calls f after each change w reports, until ctx is done, then closes w. Run it on a
// goroutine the caller owns.
func (w *Watcher) Follow(ctx context.Context, f func()) {
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Changes():
			f()
		}
	}
}
