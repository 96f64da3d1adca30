package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/host/session"
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

// Transcripts says whose transcripts the catalogue lists. The zero value
// lists none.
type Transcripts struct {
	// Listers are the backends that list their transcripts, usually
	// Options.Backends.TranscriptListers(); their roots are read once,
	// when the host starts.
	Listers []plugins.TranscriptLister
	// Index is the file the catalogue keeps what it read in between
	// starts, so a start reads only what changed; "" keeps none.
	Index string
}

// externalSessions is the host's view of the catalogue: which external
// rows the listings show, and which conversations are the host's own.
// mu serializes working out which external rows are shown and guards
// mode and view; nothing else is taken under it.
type externalSessions struct {
	cat    *catalogue.Catalogue
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
	ownChanged atomic.Bool   // own grew since the view was made
	view       *externalView // guarded by mu
}

// rootConfigFile keeps the root config across restarts.
const rootConfigFile = "root-config.json"

// openCatalogue starts reading the transcripts, when there are any to read.
func (h *Host) openCatalogue() {
	t := h.opts.Transcripts
	var roots []plugins.TranscriptRoot
	for _, l := range t.Listers {
		roots = append(roots, l.TranscriptRoots()...)
	}
	if len(roots) == 0 {
		return
	}
	h.ext.mode = h.loadMode()
	h.root.Config = rootConfig(h.ext.mode, h.root.Config.Values)
	// The catalogue's first batch may come before Open returns; it waits
	// on ext.mu for h.ext.cat.
	h.ext.mu.Lock()
	defer h.unlockExt()
	h.ext.cat = catalogue.Open(catalogue.Config{
		Roots:     roots,
		IndexPath: t.Index,
		OnChange:  h.catalogueChanged,
		Logger:    h.log,
	})
}

// closeCatalogue stops the catalogue's watching, when it has one.
func (h *Host) closeCatalogue() error {
	if h.ext.cat == nil {
		return nil
	}
	if err := h.ext.cat.Close(); err != nil {
		return fmt.Errorf("closing the catalogue: %w", err)
	}
	return nil
}

// rootConfig is the root config a host with a catalogue offers: the
// catalogue's key, and the values kept so far.
func rootConfig(mode catalogue.Mode, kept protocol.Object) *protocol.RootConfigState {
	props := protocol.NewMap[protocol.ConfigPropertySchema]()
	p := protocol.ConfigPropertySchema{
		Type:        "string",
		Title:       "Show external sessions",
		Description: new("Which sessions found in the agents' own transcripts, that this host never ran, are listed."),
		Default:     session.QuoteJSON(string(catalogue.DefaultMode)),
		EnumLabels:  []string{"None", "The two most recent", "Last 24 hours", "Last 7 days", "Last 30 days"},
	}
	for _, m := range catalogue.Modes() {
		p.Enum = append(p.Enum, session.QuoteJSON(string(m)))
	}
	props.Set(catalogue.ConfigKey, p)
	values := maps.Clone(kept)
	if values == nil {
		values = protocol.Object{}
	}
	values[catalogue.ConfigKey] = session.QuoteJSON(string(mode))
	return &protocol.RootConfigState{Schema: protocol.ConfigSchema{Properties: props}, Values: values}
}

// loadMode reads the stored showExternalSessions, the default if none.
func (h *Host) loadMode() catalogue.Mode {
	data, err := os.ReadFile(filepath.Join(h.opts.StateDir, rootConfigFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("cannot read the root config; using the defaults", "err", err)
		}
		return catalogue.DefaultMode
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		h.log.Warn("cannot read the root config; using the defaults", "err", err)
		return catalogue.DefaultMode
	}
	m, _ := catalogue.ParseMode(values[catalogue.ConfigKey])
	return m
}

func (h *Host) saveMode(m catalogue.Mode) {
	if h.opts.StateDir == "" || h.opts.Sessions == "memory" {
		return
	}
	data, _ := json.Marshal(map[string]string{catalogue.ConfigKey: string(m)})
	if err := writeFileAtomic(filepath.Join(h.opts.StateDir, rootConfigFile), data); err != nil {
		h.storeErrors.Add(1)
		h.log.Error("cannot store the root config", "err", err)
	}
}

// modeChanged applies a new showExternalSessions: every client is told
// what it now shows and what it no longer does.
func (h *Host) modeChanged() {
	if h.ext.cat == nil {
		return // a host with no catalogue shows no external sessions
	}
	h.rootMu.Lock()
	m, _ := catalogue.ParseMode(session.StringValue(h.root.Config.Values[catalogue.ConfigKey]))
	h.unlockRoot()
	h.noteCutoff()
	h.ext.mu.Lock()
	defer h.unlockExt()
	if m == h.ext.mode {
		return
	}
	h.ext.mode = m
	h.saveMode(m)
	h.republishLocked(nil)
}

// catalogueChanged is the catalogue's OnChange: the shown set is worked
// out again (under recent one row may push another out), and rows still
// shown that changed are told as summary changes.
func (h *Host) catalogueChanged(changes []catalogue.Change) {
	h.noteCutoff()
	h.ext.mu.Lock()
	defer h.unlockExt()
	h.republishLocked(changes)
}

// unlockExt lets ext.mu go and hands on the view's notifications.
func (h *Host) unlockExt() { outbox.Release(&h.ext.mu, h.ext.out, h.outboxes()) }

// republishLocked tells every client the external rows that are now shown
// and those no longer shown, then the changes of rows shown throughout.
// The caller holds ext.mu.
func (h *Host) republishLocked(changes []catalogue.Change) {
	if h.ext.cat == nil {
		return
	}
	h.ext.staleViewLocked()
	shown := h.visibleLocked()
	before := h.ext.shownRows()
	next := make(map[catalogue.Key]bool, len(shown))
	for i := range shown {
		k := shown[i].Key()
		next[k] = true
		if !before[k] {
			sum := externalSummary(&shown[i])
			h.notifyExternal(k, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum})
		}
	}
	for k := range before {
		if !next[k] {
			h.notifyExternal(k, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: k.URI()})
		}
	}
	for _, ch := range changes {
		k := ch.Row.Key()
		if ch.Kind == catalogue.Changed && before[k] && next[k] {
			changes := ch.Partial()
			if changes.Title != nil {
				changes.Chats = externalSummary(&ch.Row).Chats // the chat carries the title too
			}
			h.notifyExternal(k, "root/sessionSummaryChanged", &protocol.SessionSummaryChangedParams{
				Channel: protocol.RootURI, Session: k.URI(), Changes: changes,
			})
		}
	}
	h.ext.shown.Store(&next)
}

// notifyExternal queues telling every client of a change to an external
// row, unless the host holds the session open: its own summary speaks for
// it then. The caller holds ext.mu.
func (h *Host) notifyExternal(k catalogue.Key, method string, params any) {
	h.ext.out.Later(func() {
		if !h.heldOpen(k) {
			h.bus.Notify(protocol.RootURI, method, params, nil)
		}
	})
}

// shownRows returns the external rows clients were last told of; the map
// is never changed.
func (x *externalSessions) shownRows() map[catalogue.Key]bool {
	if m := x.shown.Load(); m != nil {
		return *m
	}
	return nil
}

// heldOpen reports whether an external session is held by the host, whose
// own summary then speaks for it.
func (h *Host) heldOpen(k catalogue.Key) bool {
	h.mu.Lock()
	s := h.sessions[k.ID]
	h.mu.Unlock()
	return s != nil && s.Provider() == k.Provider
}

// visibleLocked returns the external rows a listing shows now. The caller
// holds ext.mu.
func (h *Host) visibleLocked() []catalogue.Row {
	now := h.now()
	shown, hidden := catalogue.Visible(h.ext.mode, now, h.ext.cat.Rows(), h.ext.cutoffAt(), h.ext.isOwn)
	if hidden > 0 && h.ext.mode != catalogue.ShowNone {
		h.log.Debug("external sessions hidden by showExternalSessions", "mode", h.ext.mode, "hidden", hidden)
	}
	return shown
}

// noteCutoff fixes, the first time, the cutoff recent compares with: the
// host's own sessions as they were at the first listing, so what it shows
// does not jump as they move. It reads the sessions holding no other lock.
func (h *Host) noteCutoff() {
	if h.ext.cutoff.Load() != nil {
		return
	}
	var own []time.Time
	for _, s := range h.sessionList() {
		if t, ok := s.OwnModifiedAt(); ok {
			own = append(own, t)
		}
	}
	cutoff := catalogue.OwnCutoff(own)
	h.ext.cutoff.CompareAndSwap(nil, &cutoff)
}

// cutoffAt returns the cutoff noteCutoff fixed.
func (x *externalSessions) cutoffAt() time.Time {
	if t := x.cutoff.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// externalView is the external rows a listing shows, ready to merge: their
// listing keys, and the set of their URIs. It is shared by every listing
// until the catalogue, the mode or the host's own sessions change, or the
// windows have moved on; nobody modifies it.
type externalView struct {
	at    time.Time
	keys  []rowKey // in listing order
	byURI map[string]bool
}

// viewTTL bounds how long a view stands with nothing changed: the windows
// of the modes move with the clock.
const viewTTL = time.Minute

// externalRows returns the view of the external rows a listing shows.
func (h *Host) externalRows() *externalView {
	if h.ext.cat == nil {
		return &externalView{}
	}
	h.noteCutoff()
	h.ext.mu.Lock()
	defer h.unlockExt()
	stale := h.ext.ownChanged.Swap(false)
	if v := h.ext.view; v != nil && !stale && h.now().Sub(v.at) < viewTTL {
		return v
	}
	rows := h.visibleLocked()
	v := &externalView{at: h.now(), keys: make([]rowKey, len(rows)), byURI: make(map[string]bool, len(rows))}
	for i := range rows {
		uri := rows[i].URI()
		v.keys[i] = rowKey{pageKey: pageKey{protocol.FormatTime(rows[i].ModifiedAt), uri}, row: &rows[i]}
		v.byURI[uri] = true
	}
	// The catalogue's order is nearly the listing's, but it compares times
	// finer than the listing's keys show them and providers before ids:
	// merging needs the listing's own.
	byListing := func(a, b rowKey) int { return a.compare(b.pageKey) }
	if !slices.IsSortedFunc(v.keys, byListing) {
		slices.SortFunc(v.keys, byListing)
	}
	h.ext.view = v
	return v
}

// staleViewLocked drops the view; the next listing works it out again.
// The caller holds ext.mu.
func (x *externalSessions) staleViewLocked() { x.view = nil }

// isOwn reports whether a catalogue row is of a session this host runs or
// ran (an opened external session is not, until it is adopted).
func (x *externalSessions) isOwn(k catalogue.Key) bool {
	if m := x.own.Load(); m != nil {
		return (*m)[k]
	}
	return false
}

// changeOwn replaces the own set with a copy fn changed. fn reports
// whether the set grew, which may make a listed row no longer external.
func (x *externalSessions) changeOwn(fn func(map[catalogue.Key]bool) bool) {
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

// noteOwn records conversations as the host's own.
func (h *Host) noteOwn(keys []catalogue.Key) {
	if len(keys) == 0 || !slices.ContainsFunc(keys, func(k catalogue.Key) bool { return !h.ext.isOwn(k) }) {
		return // the usual case: nothing new
	}
	h.ext.changeOwn(func(own map[catalogue.Key]bool) bool {
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

// externalSummary is an external row as a client lists it.
func externalSummary(r *catalogue.Row) protocol.SessionSummary {
	sum := r.Summary()
	sum.Meta = protocol.Object{session.ExternalMeta: jsontext.Value("true")}
	// Opened, it is a session of one chat, its default: the row says so.
	chat := protocol.DefaultChatURI(sum.Resource)
	sum.DefaultChat = &chat
	sum.Chats = []protocol.SessionChatSummary{{Resource: chat, Title: sum.Title,
		Origin: &protocol.ChatOriginUser{}, Status: new(sum.Status)}}
	return sum
}

// catalogueWait bounds how long a command naming an external session
// waits for the catalogue's first scan, right after ahpd starts.
const catalogueWait = 10 * time.Second

// awaitCatalogue waits until the catalogue has published its first scan,
// so that a client naming an external session as ahpd starts (a client
// reconnecting after a restart) finds it rather than being told there is
// none. It reports whether the host has a catalogue.
func (h *Host) awaitCatalogue(c *conn.Conn) bool {
	if h.ext.cat == nil {
		return false
	}
	select {
	case <-h.ext.cat.Ready():
		return true
	default:
	}
	t := time.NewTimer(catalogueWait)
	defer t.Stop()
	select {
	case <-h.ext.cat.Ready():
	case <-c.Context().Done():
	case <-t.C:
	}
	return true
}

// openExternal holds an external session a client asked for, so it can be
// watched and continued: it is read from its transcript and resumed by its
// backend from its own folder. It stays external until adopted.
func (h *Host) openExternal(su protocol.SessionURI) *session.Session {
	provider := su.Provider()
	if h.ext.cat == nil || provider == "" {
		return nil
	}
	row, ok := h.ext.cat.Lookup(provider, su.ID)
	if !ok || h.ext.isOwn(row.Key()) {
		return nil
	}
	dir := row.Cwd
	if dir == "" || !row.CwdExists {
		dir = h.opts.DefaultDirectory
	}
	created, modified := protocol.FormatTime(row.CreatedAt), protocol.FormatTime(row.ModifiedAt)
	uri := su.String()
	rec := &session.Record{
		AHPD: session.RecordVersion, URI: uri, Provider: provider, Title: row.DisplayTitle(),
		CreatedAt: created, ModifiedAt: modified, WorkingDirectories: []string{dir},
		Lifecycle: string(protocol.SessionLifecycleReady), DefaultChat: protocol.DefaultChatURI(uri),
		Chats: []*session.ChatRecord{{URI: protocol.DefaultChatURI(uri), Title: row.DisplayTitle(), ModifiedAt: modified,
			Conversation: row.ID, Started: true}},
		External: true, Folder: dir,
	}
	s, err := h.restore(rec, nil)
	if err != nil {
		h.log.Warn("cannot open an external session", "session", uri, "err", err)
		return nil
	}
	h.mu.Lock()
	if other := h.sessions[su.ID]; other != nil {
		h.mu.Unlock()
		return other // opened by another client meanwhile
	}
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	h.sessions[su.ID] = s
	h.mu.Unlock()
	h.order.add(s, s.CurrentSummary().ModifiedAt)
	s.Persist()
	h.log.Info("opened an external session", "session", uri, "dir", dir)
	return s
}
