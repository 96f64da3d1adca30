package listing

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The catalogue: sessions the backends' own transcripts name. A row of a
// session this host runs or ran is its own, listed from the registry; any
// other is external, and the root config's showExternalSessions says which
// of those a listing shows. An external session opened by a client is
// held like any other, still external, until a person's turn goes out in
// it: that adopts it.

// Config is what an External is given of the host. Sink is required; any
// other field left zero does nothing (or, for Now and Log, is the wall
// clock and a discarding logger).
type Config struct {
	// ModeFile keeps showExternalSessions across restarts; "" keeps it
	// nowhere.
	ModeFile string
	Log      *slog.Logger
	Now      func() time.Time
	// Sink hands on what a change of the view tells clients, in order,
	// once the view's lock is let go.
	Sink outbox.Sink
	// Notify tells every client of a change on the root channel.
	Notify func(method string, params any)
	// HeldOpen reports whether the host holds an external session open:
	// its own summary speaks for it then, and the view's notes of its row
	// are not sent.
	HeldOpen func(catalogue.Key) bool
	// OwnTimes returns when each of the host's own sessions was last
	// modified, for the cutoff the recent mode compares with.
	OwnTimes func() []time.Time
	// StoreFailed is told of a write of ModeFile that failed.
	StoreFailed func(error)
}

// External is the host's view of the catalogue: which external rows the
// listings show, and which conversations are the host's own. mu
// serializes working out which external rows are shown and guards mode
// and view; nothing else is taken under it.
type External struct {
	cfg    Config
	cat    *catalogue.Catalogue // nil: no transcripts to read; set once, by Start
	mu     lockcheck.Mutex
	mode   catalogue.Mode
	cutoff atomic.Pointer[time.Time] // set once (noteCutoff)
	// shown is the external rows clients were last told of: a map
	// replaced whole, never changed, so it is read without a lock.
	shown atomic.Pointer[map[catalogue.Key]bool]
	out   *outbox.Outbox // the view's notifications, handed on as mu is let go
	// own is the conversations of the host's own sessions: a map replaced
	// whole (ownMu serializes its writers), read without a lock.
	ownMu      lockcheck.Mutex
	own        atomic.Pointer[map[catalogue.Key]bool]
	ownChanged atomic.Bool // own grew since the view was made
	view       *View       // guarded by mu
}

// NewExternal returns a view with no catalogue yet (Start opens it).
func NewExternal(cfg Config) *External {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Notify == nil {
		cfg.Notify = func(string, any) {}
	}
	if cfg.HeldOpen == nil {
		cfg.HeldOpen = func(catalogue.Key) bool { return false }
	}
	if cfg.OwnTimes == nil {
		cfg.OwnTimes = func() []time.Time { return nil }
	}
	if cfg.StoreFailed == nil {
		cfg.StoreFailed = func(error) {}
	}
	return &External{cfg: cfg, mu: lockcheck.Mutex{Class: "external"}, out: outbox.New(""),
		ownMu: lockcheck.Mutex{Class: "own"}}
}

// Start reads the mode kept and starts reading the transcripts under
// roots, keeping what it read in index ("" keeps none) between starts.
// It returns the mode, which the host's root config offers. With no roots
// it starts nothing: the host shows no external sessions.
func (x *External) Start(roots []plugins.TranscriptRoot, index string) catalogue.Mode {
	if len(roots) == 0 {
		return catalogue.DefaultMode
	}
	x.mode = loadMode(x.cfg.ModeFile, x.cfg.Log)
	// The catalogue's first batch may come before Open returns; it waits
	// on mu for cat.
	x.mu.Lock()
	defer x.unlock()
	x.cat = catalogue.Open(catalogue.Config{
		Roots:     roots,
		IndexPath: index,
		OnChange:  x.changed,
		Logger:    x.cfg.Log,
	})
	return x.mode
}

// Close stops the catalogue's watching, when it has one.
func (x *External) Close() error {
	if x.cat == nil {
		return nil
	}
	if err := x.cat.Close(); err != nil {
		return fmt.Errorf("closing the catalogue: %w", err)
	}
	return nil
}

// Has reports whether the host reads any transcripts.
func (x *External) Has() bool { return x.cat != nil }

// SetMode applies a new showExternalSessions: every client is told what
// it now shows and what it no longer does.
func (x *External) SetMode(m catalogue.Mode) {
	if x.cat == nil {
		return // a host with no catalogue shows no external sessions
	}
	x.noteCutoff()
	x.mu.Lock()
	defer x.unlock()
	if m == x.mode {
		return
	}
	x.mode = m
	saveMode(x.cfg.ModeFile, m, x.cfg.StoreFailed)
	x.republishLocked(nil)
}

// changed is the catalogue's OnChange: the shown set is worked out again
// (under recent one row may push another out), and rows still shown that
// changed are told as summary changes.
func (x *External) changed(changes []catalogue.Change) {
	x.noteCutoff()
	x.mu.Lock()
	defer x.unlock()
	x.republishLocked(changes)
}

// unlock lets mu go and hands on the view's notifications.
func (x *External) unlock() { outbox.Release(&x.mu, x.out, x.cfg.Sink) }

// republishLocked tells every client the external rows that are now shown
// and those no longer shown, then the changes of rows shown throughout.
// The caller holds mu.
func (x *External) republishLocked(changes []catalogue.Change) {
	if x.cat == nil {
		return
	}
	x.view = nil // the next listing works it out again
	shown := x.visibleLocked()
	before := x.shownRows()
	next := make(map[catalogue.Key]bool, len(shown))
	for i := range shown {
		k := shown[i].Key()
		next[k] = true
		if !before[k] {
			sum := summary(&shown[i])
			x.notify(k, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum})
		}
	}
	for k := range before {
		if !next[k] {
			x.notify(k, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: k.URI()})
		}
	}
	for _, ch := range changes {
		k := ch.Row.Key()
		if ch.Kind == catalogue.Changed && before[k] && next[k] {
			changes := ch.Partial()
			if changes.Title != nil {
				changes.Chats = summary(&ch.Row).Chats // the chat carries the title too
			}
			x.notify(k, "root/sessionSummaryChanged", &protocol.SessionSummaryChangedParams{
				Channel: protocol.RootURI, Session: k.URI(), Changes: changes,
			})
		}
	}
	x.shown.Store(&next)
}

// notify queues telling every client of a change to an external row,
// unless the host holds the session open: its own summary speaks for it
// then. The caller holds mu.
func (x *External) notify(k catalogue.Key, method string, params any) {
	x.out.Later(func() {
		if !x.cfg.HeldOpen(k) {
			x.cfg.Notify(method, params)
		}
	})
}

// shownRows returns the external rows clients were last told of; the map
// is never changed.
func (x *External) shownRows() map[catalogue.Key]bool {
	if m := x.shown.Load(); m != nil {
		return *m
	}
	return nil
}

// Shown reports whether clients were last told the row is listed.
func (x *External) Shown(k catalogue.Key) bool { return x.shownRows()[k] }

// visibleLocked returns the external rows a listing shows now. The caller
// holds mu.
func (x *External) visibleLocked() []catalogue.Row {
	shown, hidden := catalogue.Visible(x.mode, x.cfg.Now(), x.cat.Rows(), x.cutoffAt(), x.IsOwn)
	if hidden > 0 && x.mode != catalogue.ShowNone {
		x.cfg.Log.Debug("external sessions hidden by showExternalSessions", "mode", x.mode, "hidden", hidden)
	}
	return shown
}

// noteCutoff fixes, the first time, the cutoff recent compares with: the
// host's own sessions as they were at the first listing, so what it shows
// does not jump as they move. It holds no lock: OwnTimes reads the
// sessions.
func (x *External) noteCutoff() {
	if x.cutoff.Load() != nil {
		return
	}
	cutoff := catalogue.OwnCutoff(x.cfg.OwnTimes())
	x.cutoff.CompareAndSwap(nil, &cutoff)
}

// cutoffAt returns the cutoff noteCutoff fixed.
func (x *External) cutoffAt() time.Time {
	if t := x.cutoff.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Lookup returns the catalogue's row of a conversation, if it has one.
func (x *External) Lookup(provider, id string) (catalogue.Row, bool) {
	if x.cat == nil {
		return catalogue.Row{}, false
	}
	return x.cat.Lookup(provider, id)
}

// catalogueWait bounds how long a command naming an external session
// waits for the catalogue's first scan, right after ahpd starts.
const catalogueWait = 10 * time.Second

// Await waits until the catalogue has published its first scan, so that a
// client naming an external session as ahpd starts (a client reconnecting
// after a restart) finds it rather than being told there is none; at most
// catalogueWait, or until ctx ends. It reports whether the host has a
// catalogue.
func (x *External) Await(ctx context.Context) bool {
	if x.cat == nil {
		return false
	}
	select {
	case <-x.cat.Ready():
		return true
	default:
	}
	t := time.NewTimer(catalogueWait)
	defer t.Stop()
	select {
	case <-x.cat.Ready():
	case <-ctx.Done():
	case <-t.C:
	}
	return true
}

// IsOwn reports whether a catalogue row is of a session this host runs or
// ran (an opened external session is not, until it is adopted).
func (x *External) IsOwn(k catalogue.Key) bool {
	if m := x.own.Load(); m != nil {
		return (*m)[k]
	}
	return false
}

// changeOwn replaces the own set with a copy fn changed. fn reports
// whether the set grew, which may make a listed row no longer external.
func (x *External) changeOwn(fn func(map[catalogue.Key]bool) bool) {
	x.ownMu.Lock()
	defer x.ownMu.Unlock()
	var next map[catalogue.Key]bool
	if m := x.own.Load(); m != nil {
		next = maps.Clone(*m)
	} else {
		next = map[catalogue.Key]bool{}
	}
	grew := fn(next)
	x.own.Store(&next)
	if grew {
		x.ownChanged.Store(true) // the view may list a row that is no longer external
	}
}

// NoteOwn records conversations as the host's own.
func (x *External) NoteOwn(keys []catalogue.Key) {
	if len(keys) == 0 || !slices.ContainsFunc(keys, func(k catalogue.Key) bool { return !x.IsOwn(k) }) {
		return // the usual case: nothing new
	}
	x.changeOwn(func(own map[catalogue.Key]bool) bool {
		added := false
		for _, k := range keys {
			if !own[k] {
				own[k] = true
				added = true
			}
		}
		return added
	})
}

// ForgetOwn records conversations as no longer the host's own (their
// session was disposed of).
func (x *External) ForgetOwn(keys []catalogue.Key) {
	x.changeOwn(func(own map[catalogue.Key]bool) bool {
		for _, k := range keys {
			delete(own, k)
		}
		return false
	})
}
