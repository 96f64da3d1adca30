package automations

import (
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Defaults of the file watcher's debounce.
const (
	// DefaultDebounce is how long a file must be left alone before its
	// changes make one file-changed event. Writing a file is several
	// changes to inotify (`echo hi > a.md` is a create and a write, tens of
	// milliseconds apart; an editor's save is more), and one save should
	// start one run.
	DefaultDebounce = 200 * time.Millisecond
	// MaxDebounceDelay bounds how long a file's changes wait: a file
	// written without pause (a log) still makes an event this often.
	MaxDebounceDelay = 2 * time.Second
	// maxPending bounds the files whose changes are waiting at once; the
	// changes of more (a checkout of a big tree) go out at once instead of
	// growing the table.
	maxPending = 10000
)

// WatcherOptions configure an FSWatcher.
type WatcherOptions struct {
	Log   *slog.Logger
	Clock Clock // nil: the wall clock
	// Debounce is how long a file must be left alone before its changes
	// make one event (at most MaxDebounceDelay after the first, or
	// Debounce when it is longer); 0 is DefaultDebounce, negative makes
	// each change an event of its own.
	Debounce time.Duration
	// Budget is the most folders the watcher watches for the whole host;
	// 0 is DefaultWatchBudget. Each Watch's Share is its owner's part.
	Budget int

	// noted, for tests, is called once an fsnotify event has been taken
	// in: what the debounce does with it is decided by then.
	noted func(path string)
}

// debouncer gathers each path's file-changed events into one, sent once
// the path has been quiet for quiet, or most after its first change. It
// is the watcher goroutine's alone: no lock.
type debouncer struct {
	quiet, most time.Duration
	pending     map[string]*pendingChange
}

type pendingChange struct {
	ev          Event
	first, last time.Time
}

func newDebouncer(quiet time.Duration) *debouncer {
	if quiet == 0 {
		quiet = DefaultDebounce
	}
	return &debouncer{quiet: quiet, most: max(quiet, MaxDebounceDelay), pending: map[string]*pendingChange{}}
}

// add takes a change at now; it reports false when the change is to go
// out at once (no debounce, or too many files waiting).
func (d *debouncer) add(ev Event, now time.Time) bool {
	if d.quiet < 0 {
		return false
	}
	if p := d.pending[ev.Path]; p != nil {
		p.ev, p.last = ev, now
		return true
	}
	if len(d.pending) >= maxPending {
		return false
	}
	d.pending[ev.Path] = &pendingChange{ev: ev, first: now, last: now}
	return true
}

func (d *debouncer) dueAt(p *pendingChange) time.Time {
	return minTime(p.last.Add(d.quiet), p.first.Add(d.most))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// next is when the earliest waiting change is due; zero when none waits.
func (d *debouncer) next() time.Time {
	var next time.Time
	for _, p := range d.pending {
		if t := d.dueAt(p); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// due takes out the changes due by now, earliest first (then by path,
// so that what comes due together goes out in one order).
func (d *debouncer) due(now time.Time) []Event {
	type item struct {
		at time.Time
		ev Event
	}
	var items []item
	for path, p := range d.pending {
		if t := d.dueAt(p); !t.After(now) {
			items = append(items, item{t, p.ev})
			delete(d.pending, path)
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.ev.Path, b.ev.Path)
	})
	out := make([]Event, len(items))
	for i, it := range items {
		out[i] = it.ev
	}
	return out
}
