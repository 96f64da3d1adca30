package pluginstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WaitFile waits for the file at path, which another process writes, to
// hold what ok accepts, and returns what it held. It reads the file once,
// then again at each change fsnotify reports in its directory, which must
// exist; it gives up when ctx ends.
func WaitFile(ctx context.Context, path string, ok func(data []byte) bool) ([]byte, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	path = filepath.Clean(path)
	if err := w.Add(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("watching %s: %w", filepath.Dir(path), err)
	}
	// Read after the watch is set: a write between the two is seen by
	// one or the other.
	for {
		if data, err := os.ReadFile(path); err == nil && ok(data) {
			return data, nil
		}
		if err := nextChange(ctx, w, path); err != nil {
			return nil, err
		}
	}
}

// nextChange returns once w reports a change to path.
func nextChange(ctx context.Context, w *fsnotify.Watcher, path string) error {
	for {
		select {
		case ev := <-w.Events:
			if filepath.Clean(ev.Name) == path {
				return nil
			}
		case err := <-w.Errors:
			return fmt.Errorf("watching %s: %w", path, err)
		case <-ctx.Done():
			return fmt.Errorf("%s did not come to hold what was awaited: %w", path, ctx.Err())
		}
	}
}

// WaitFileFor is WaitFile bounded by d, failing the test if the file never
// comes to hold what ok accepts.
func WaitFileFor(t testing.TB, path string, d time.Duration, ok func(data []byte) bool) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	data, err := WaitFile(ctx, path, ok)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
