package grants

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce is how long the watcher waits after the last change it saw
// before it reads the file, so an editor's save of several steps is read
// once, whole.
const debounce = 50 * time.Millisecond

// Live is a users directory kept in step with its file. Current is cheap
// and never blocks on a reload: it returns the last directory read
// successfully. A change to the file is read within about debounce; one
// that does not parse is logged and the last good directory stays, so a
// typo in the file never locks everyone out, while a token removed from it
// is refused from the next handshake on.
//
// A file that is removed reads as an empty directory: with it gone, nobody
// has a personal token.
type Live struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Directory]
	// changed is closed, and replaced, each time cur is: Changed hands it
	// out without a lock, so that waiting never holds up a reload.
	changed atomic.Pointer[chan struct{}]

	mu      sync.Mutex        // serializes reloads; guards the fields below
	seen    [sha256.Size]byte // hash of the contents last read
	gone    bool              // the file was missing at the last read
	lastErr error             // why the contents last read did not parse

	w         *fsnotify.Watcher
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Watch reads the users file at path and watches it for changes until
// Close. It watches the file's directory rather than the file, because an
// editor's save and Save itself replace the file by a rename, which would
// leave a watch on the old file watching nothing. A file that is malformed
// now is an error; a missing one is an empty directory. log may be nil.
func Watch(path string, log *slog.Logger) (*Live, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	l := &Live{path: abs, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	first := make(chan struct{})
	l.changed.Store(&first)
	if err := l.Reload(); err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, err
	}
	l.w = w
	// A change between the first read and the watch starting would go
	// unseen: read once more now that nothing can be missed.
	if err := l.Reload(); err != nil {
		l.log.Warn("users file not reloaded; keeping the last good directory", "path", l.path, "err", err)
	}
	go l.run()
	return l, nil
}

// Current returns the directory as last read successfully.
func (l *Live) Current() *Directory { return l.cur.Load() }

// Changed returns a channel closed once the directory has changed after
// the call; Current returns the new one by then. It makes *Live a
// Notifier.
func (l *Live) Changed() <-chan struct{} { return *l.changed.Load() }

// store makes d current and tells whoever waits on Changed.
func (l *Live) store(d *Directory) {
	l.cur.Store(d)
	next := make(chan struct{})
	close(*l.changed.Swap(&next))
}

// Path returns the absolute path of the watched file.
func (l *Live) Path() string { return l.path }

// Reload reads the file now, as a change to it would. If it does not
// parse, the current directory stays and the error says why.
func (l *Live) Reload() error {
	_, err := l.reload()
	return err
}

// reload reads the file and reports whether its contents differed from
// the last read, so that the watcher logs a bad file once, not at every
// event in its directory.
func (l *Live) reload() (changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l.gone && l.cur.Load() != nil {
			return false, nil
		}
		if l.cur.Load() != nil {
			l.log.Warn("users file removed: no personal token is accepted until it is back", "path", l.path)
		}
		l.gone, l.seen, l.lastErr = true, [sha256.Size]byte{}, nil
		l.store(NewDirectory())
		return true, nil
	case err != nil:
		return true, err
	}
	sum := sha256.Sum256(data)
	if !l.gone && l.cur.Load() != nil && sum == l.seen {
		return false, l.lastErr
	}
	l.gone, l.seen = false, sum
	d, err := Decode(data)
	l.lastErr = err
	if err != nil {
		return true, err
	}
	first := l.cur.Load() == nil
	l.store(d)
	if !first {
		l.log.Info("users file reloaded", "path", l.path, "users", len(d.users))
	}
	return true, nil
}

// Close stops watching. The directory last read stays Current. Close
// returns once the watching goroutine has ended.
func (l *Live) Close() error {
	l.closeOnce.Do(func() {
		close(l.stop)
		l.closeErr = l.w.Close()
		<-l.done
	})
	return l.closeErr
}

func (l *Live) run() {
	defer close(l.done)
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	base := filepath.Base(l.path)
	for {
		select {
		case <-l.stop:
			return
		case ev, ok := <-l.w.Events:
			if !ok {
				return
			}
			// The file itself, or an entry of the directory appearing or
			// going, which is how a symlinked file is swapped.
			if filepath.Base(ev.Name) == base || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
				timer.Reset(debounce)
			}
		case err, ok := <-l.w.Errors:
			if !ok {
				return
			}
			l.log.Warn("watching the users file", "path", l.path, "err", err)
		case <-timer.C:
			if changed, err := l.reload(); changed && err != nil {
				l.log.Warn("users file not reloaded; keeping the last good directory", "path", l.path, "err", err)
			}
		}
	}
}
