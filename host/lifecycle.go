package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

const defaultTitle = "New Session"

// newSession makes a provisional session: there for the client that made
// it, announced to everyone when its first turn reaches the backend.
func (h *Host) newSession(c *conn.Conn, su protocol.SessionURI, provider string, backend plugins.Backend, dirs []string, config protocol.SessionConfigState) *session {
	now := protocol.FormatTime(h.now())
	uri := su.String()
	s := &session{
		mu: lockcheck.Mutex{Class: "session"}, out: outbox.New(uri),
		h: h, uri: uri, id: su.ID, provider: provider, backend: backend,
		chats: map[string]*chatEntry{}, busy: map[*chats.Chat]bool{},
		provisional: true, creatorID: c.Client(), creator: c.Principal(), used: h.now(), lastAction: h.now(),
	}
	s.awake.Store(true)
	s.setWorkDir(dirs[0])
	chatURI := protocol.DefaultChatURI(uri)
	s.rec = record{
		AHPD: recordVersion, URI: uri, Provider: provider, Title: defaultTitle,
		CreatedAt: now, ModifiedAt: now, WorkingDirectories: dirs, Config: config.Values, Folder: dirs[0],
		Lifecycle: string(protocol.SessionLifecycleCreating), DefaultChat: chatURI,
		Chats: []*chatRecord{{URI: chatURI, Title: defaultTitle, ModifiedAt: now, Conversation: su.ID}},
	}
	s.build(config, nil)
	return s
}

// restore makes a session of a stored record and, when there is one, of
// its journal's tail (rc, restart.go). It comes back asleep: its agents
// start again on its next turn.
func (h *Host) restore(rec *record, rc *recovered) (*session, error) {
	su, err := protocol.ParseSessionURI(rec.URI)
	if err != nil {
		return nil, err
	}
	if len(rec.WorkingDirectories) == 0 || len(rec.Chats) == 0 {
		return nil, errors.New("the record has no working directory or no chat")
	}
	backend, _ := h.opts.Backends.Get(rec.Provider)
	s := &session{
		mu: lockcheck.Mutex{Class: "session"}, out: outbox.New(rec.URI),
		h: h, uri: rec.URI, id: su.ID, provider: rec.Provider, backend: backend,
		chats: map[string]*chatEntry{}, busy: map[*chats.Chat]bool{},
		rec: *rec, announced: true, stored: true, asleep: true, used: h.now(), lastAction: h.now(),
	}
	s.setWorkDir(rec.WorkingDirectories[0])
	if rc != nil {
		rc.into(&s.rec)
	}
	owner, _ := grants.Parse(rec.Owner)
	config, _ := h.resolveConfig(backend, s.rec.Config, owner, s.rec.folder())
	s.build(config, rc)
	for _, e := range s.chats {
		if e.loaded {
			s.setAwakeLocked(true) // it holds turns: it falls asleep as any session does
		}
	}
	if rec.External {
		s.announced = false
		s.state.Meta = protocol.Object{externalMeta: jsontext.Value("true")}
		s.summary = s.computeSummaryLocked()
	}
	if h.loadingOwn != nil {
		// Loading: noted all at once after (loadSessions), for each
		// noting copies the whole set.
		*h.loadingOwn = append(*h.loadingOwn, s.ownKeysLocked()...)
	} else {
		h.noteOwn(s.ownKeysLocked())
	}
	if rec.CreationError != "" {
		s.state.CreationError = &protocol.ErrorInfo{ErrorType: "backendStartFailed", Message: rec.CreationError}
	}
	return s, nil
}

// build makes the session's state and chats from its record, each chat's
// from its state in rc, the journal's tail, when it is there.
func (s *session) build(config protocol.SessionConfigState, rc *recovered) {
	rec := &s.rec
	if rec.Lifecycle == "creationFailed" {
		rec.Lifecycle = string(protocol.SessionLifecycleFailed) // its name before 0.9
	}
	status := protocol.StatusIdle.With(protocol.StatusIsRead, rec.Read).With(protocol.StatusIsArchived, rec.Archived)
	dirs := make([]protocol.URI, len(rec.WorkingDirectories))
	for i, d := range rec.WorkingDirectories {
		dirs[i] = fileURI(d)
	}
	s.snapDue = true
	s.state = &protocol.SessionState{
		Provider:           rec.Provider,
		Title:              rec.Title,
		Status:             status,
		Lifecycle:          protocol.SessionLifecycle(rec.Lifecycle),
		WorkingDirectories: dirs,
		ActiveClients:      []protocol.SessionActiveClient{},
		DefaultChat:        new(rec.DefaultChat),
		Config:             &config,
		Meta:               withMetadata(nil, rec.Metadata),
	}
	for _, cr := range rec.Chats {
		if cr.URI == rec.DefaultChat {
			cr.Read, cr.Archived = rec.Read, rec.Archived // they move together (marks.go)
		}
		var movable *bool
		if cr.URI != rec.DefaultChat {
			movable = new(true)
		}
		cs := &protocol.ChatState{
			Movable:    movable,
			Resource:   cr.URI,
			Title:      cr.Title,
			Status:     protocol.StatusIdle.With(protocol.StatusIsRead, cr.Read).With(protocol.StatusIsArchived, cr.Archived),
			ModifiedAt: cr.ModifiedAt,
			Origin:     &protocol.ChatOriginUser{},
			Turns:      []protocol.Turn{},
			// What waited to be sent when the host stopped.
			SteeringMessage: cr.Steering,
			QueuedMessages:  cr.Queued,
			Draft:           cr.Draft,
		}
		loaded := false
		if rcs := rc.chat(cr.URI); rcs != nil {
			// The state clients saw, turns and all: the journal's, not the
			// backend's (turntrack.go). Turns a snapshot holds as they are
			// stay there until the chat needs them, unless a turn runs.
			cs, loaded = rcs, !rc.bare[cr.URI] // cr.TurnsAt is rc's (recovered.into)
			if loaded && cr.TurnsAt != 0 && cs.ActiveTurn == nil {
				bare := *cs
				bare.Turns, bare.TurnsNextCursor = []protocol.Turn{}, nil
				cs, loaded = &bare, false
			}
		}
		e := s.newChat(cr, cs)
		e.loaded = loaded
		entry := chatSummary(cs)
		entry.Changes = cr.Changes
		s.state.Chats = append(s.state.Chats, entry)
	}
	s.summary = s.computeSummaryLocked()
}

func chatSummary(cs *protocol.ChatState) protocol.ChatSummary {
	return protocol.ChatSummary{
		Resource: cs.Resource, Title: cs.Title, Status: cs.Status, Activity: cs.Activity,
		ModifiedAt: cs.ModifiedAt, Origin: cs.Origin, Interactivity: cs.Interactivity,
		WorkingDirectories: cs.WorkingDirectories, Movable: cs.Movable,
	}
}

// loadTurns gives a chat whose turns are not in memory its finished turns
// once: from the journal when a snapshot there holds them (turntrack.go),
// else from its backend, keeping the last TurnWindow of them in its
// state. A second caller waits for the first's read.
func (s *session) loadTurns(ctx context.Context, e *chatEntry) {
	s.mu.Lock()
	for e.loading != nil {
		loading := e.loading
		s.unlock()
		select {
		case <-loading:
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
	}
	if e.loaded {
		s.unlock()
		return
	}
	e.loaded = true
	loading := make(chan struct{})
	e.loading = loading
	conv := plugins.Conversation{ID: e.rec.Conversation, Dir: s.workDir()}
	started, at := e.rec.Started, e.rec.TurnsAt
	s.unlock()
	defer func() {
		s.mu.Lock()
		e.loading = nil
		s.unlock()
		close(loading)
	}()
	if at != 0 && s.h.opts.Journal != nil && s.restoreTurns(ctx, e, at) {
		return
	}
	var turns []protocol.Turn
	read := false
	if started && s.backend != nil {
		var err error
		turns, err = s.backend.Turns(ctx, conv)
		switch {
		case err == nil:
			read = true
		case !errors.Is(err, plugins.ErrNotFound):
			s.h.log.Warn("could not read a chat's turns", "chat", e.rec.URI, "err", err)
			return
		}
	}
	s.mu.Lock()
	turns = e.withCut(e.timed(turns))
	if cs := e.chat.State(); (read || len(turns) > 0) && len(cs.Turns) == 0 && cs.ActiveTurn == nil { // else turns came in while reading: the live ones win
		loaded := &protocol.ChatTurnsLoadedAction{Turns: turns}
		if window := s.h.opts.TurnWindow; len(turns) > window {
			loaded.TurnsNextCursor = new(turnCursor(len(turns) - window))
			loaded.Turns = turns[len(turns)-window:]
		}
		s.emitChatLocked(e.chat, loaded, nil)
	}
	s.unlock()
}

// keepTiming records when a finished turn started and how long it took,
// as its actions said. Called with s.mu held.
func (e *chatEntry) keepTiming(turnID string) {
	turns := e.chat.State().Turns
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		if t.ID != turnID {
			continue
		}
		if t.StartedAt != nil && t.Duration != nil {
			if e.rec.Timing == nil {
				e.rec.Timing = map[string]turnTiming{}
			}
			e.rec.Timing[turnID] = turnTiming{StartedAt: *t.StartedAt, Duration: *t.Duration}
		}
		return
	}
}

// timed gives turns read back from a backend the start and duration their
// clients were told, in place.
func (e *chatEntry) timed(turns []protocol.Turn) []protocol.Turn {
	for i := range turns {
		if tt, ok := e.rec.Timing[turns[i].ID]; ok {
			turns[i].StartedAt, turns[i].Duration = new(tt.StartedAt), new(tt.Duration)
		}
	}
	return turns
}

// dispose ends the session: its turns stop, its agents go, the backend's
// copy of its conversations is deleted, its record is dropped and every
// client is told.
func (h *Host) dispose(ctx context.Context, s *session) error {
	s.pin(false) // not while it falls asleep
	defer s.unpin()
	done, list, gone := s.cancelChats()
	if gone {
		return nil
	}
	for _, d := range done {
		<-d
	}
	announced := s.noteDisposed()

	var errs []error
	for _, e := range list {
		if err := e.chat.Close(); err != nil {
			errs = append(errs, err)
		}
		if s.backend != nil && e.rec.Started {
			conv := plugins.Conversation{ID: e.rec.Conversation, Dir: s.workDir()}
			if err := s.backend.Delete(ctx, conv); err != nil {
				errs = append(errs, fmt.Errorf("deleting the backend's copy of %s: %w", e.rec.URI, err))
			}
		}
	}
	if err := s.cleanUpGit(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := h.removeRecord(s.id); err != nil {
		errs = append(errs, fmt.Errorf("removing the stored session: %w", err))
	}
	if err := h.forgetJournal(ctx, s.uri); err != nil {
		errs = append(errs, fmt.Errorf("deleting the session's journal: %w", err))
	}
	h.mu.Lock()
	delete(h.sessions, s.id)
	h.mu.Unlock()
	h.order.remove(s)
	h.letGo(s.id)
	s.forgetOwn()
	for _, e := range list {
		h.unsubscribeAll(e.rec.URI)
		h.forgetChatHome(e.rec.URI)
	}
	h.unsubscribeAll(s.uri)
	s.endRunning()
	if announced {
		h.bus.Notify(protocol.RootURI, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: s.uri}, nil)
	}
	return errors.Join(errs...)
}

// cancelChats cancels the turns of each of the session's chats, for
// dispose to wait on without the lock; gone is true, and nothing is
// cancelled, when the session was disposed of already.
func (s *session) cancelChats() (done []<-chan struct{}, list []*chatEntry, gone bool) {
	s.mu.Lock()
	defer s.unlock()
	if s.disposed {
		return nil, nil, true
	}
	for _, uri := range s.order {
		e := s.chats[uri]
		done = append(done, e.chat.Cancel())
		list = append(list, e)
	}
	return done, list, false
}

// noteDisposed marks the session disposed of once its turns have stopped,
// and reports whether clients were told of it, so must be told it is gone.
func (s *session) noteDisposed() (announced bool) {
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
	return s.announced
}

// endRunning takes a disposed session out of root's count of active ones,
// if it was counted there.
func (s *session) endRunning() {
	s.mu.Lock()
	defer s.unlock()
	if s.running {
		s.running = false
		s.h.addActive(-1)
	}
}

// unsubscribeAll drops every subscription of a channel that is gone.
func (h *Host) unsubscribeAll(channel string) {
	for _, sub := range h.bus.Drop(channel) {
		sub.(*conn.Conn).Forget(channel)
	}
}

// fileURI turns a path into a file URI.
func fileURI(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

// dirOf returns the path of a working directory URI; it must name a
// directory that exists.
func dirOf(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return "", fmt.Errorf("working directory %s is not a file:// URI", protocol.Quote(uri))
	}
	path := filepath.FromSlash(u.Path)
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("working directory %s is not an absolute path", protocol.Quote(uri))
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", protocol.Quote(uri), err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("working directory %s is not a directory", protocol.Quote(uri))
	}
	return path, nil
}

// checkSessionID refuses ids a backend cannot file a conversation under.
func checkSessionID(id string) error {
	switch {
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("session id %s starts with a dot", protocol.Quote(id))
	case strings.ContainsAny(id, "\\\x00"):
		return fmt.Errorf("session id %s has a character a file name cannot hold", protocol.Quote(id))
	case len(id) > 200:
		return fmt.Errorf("session id is longer than 200 characters")
	}
	return nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
