package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Build makes the session's state and chats from its record, each chat's
// from its state in rc, the journal's tail, when it is there.
func (s *Session) build(config protocol.SessionConfigState, rc *Recovered) {
	rec := &s.rec
	if rec.Lifecycle == "creationFailed" {
		rec.Lifecycle = string(protocol.SessionLifecycleFailed) // its name before 0.9
	}
	status := protocol.StatusIdle.With(protocol.StatusIsRead, rec.Read).With(protocol.StatusIsArchived, rec.Archived)
	dirs := make([]protocol.URI, len(rec.WorkingDirectories))
	for i, d := range rec.WorkingDirectories {
		dirs[i] = FileURI(d)
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
			Origin:     originOf(cr),
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
			cs, loaded = rcs, !rc.Bare[cr.URI] // cr.TurnsAt is rc's (recovered.into)
			if loaded && cr.TurnsAt != 0 && cs.ActiveTurn == nil {
				bare := *cs
				bare.Turns, bare.TurnsNextCursor = []protocol.Turn{}, nil
				cs, loaded = &bare, false
			}
		}
		e := s.newChat(cr, cs)
		e.loaded = loaded
		entry := chatSummary(s.entryState(cs, cr.URI == rec.DefaultChat)) // titles.go
		entry.Changes = cr.Changes
		s.state.Chats = append(s.state.Chats, entry)
	}
	s.setSummaryLocked(s.computeSummaryLocked())
}

func chatSummary(cs *protocol.ChatState) protocol.ChatSummary {
	return protocol.ChatSummary{
		Resource: cs.Resource, Title: cs.Title, Status: cs.Status, Activity: cs.Activity,
		ModifiedAt: cs.ModifiedAt, Origin: cs.Origin, Interactivity: cs.Interactivity,
		WorkingDirectories: cs.WorkingDirectories, Movable: cs.Movable,
	}
}

// LoadTurns gives a chat whose turns are not in memory its finished turns
// once: from the journal when a snapshot there holds them (turntrack.go),
// else from its backend, keeping the last TurnWindow of them in its
// state. A second caller waits for the first's read.
func (s *Session) LoadTurns(ctx context.Context, e *ChatEntry) {
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
	conv := plugins.Conversation{ID: e.rec.Conversation, Dir: s.WorkDir()}
	started, at := e.rec.Started, e.rec.TurnsAt
	s.unlock()
	defer func() {
		s.mu.Lock()
		e.loading = nil
		s.unlock()
		close(loading)
	}()
	if at != 0 && s.h.Journaled && s.restoreTurns(ctx, e, at) {
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
			s.h.Log.Warn("could not read a chat's turns", "chat", e.rec.URI, "err", err)
			return
		}
	}
	s.mu.Lock()
	turns = e.withCut(e.timed(e.visible(turns)))
	if cs := e.chat.State(); (read || len(turns) > 0) && len(cs.Turns) == 0 && cs.ActiveTurn == nil { // else turns came in while reading: the live ones win
		loaded := &protocol.ChatTurnsLoadedAction{Turns: turns}
		if window := s.h.TurnWindow; len(turns) > window {
			loaded.TurnsNextCursor = new(TurnCursor(len(turns) - window))
			loaded.Turns = turns[len(turns)-window:]
		}
		s.emitChatLocked(e.chat, loaded, nil)
	}
	s.unlock()
}

// keepTiming records when a finished turn started and how long it took,
// as its actions said. Called with s.mu held.
func (e *ChatEntry) keepTiming(turnID string) (took time.Duration) {
	took = -1 // not known
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
			took = time.Duration(*t.Duration) * time.Millisecond
		}
		return took
	}
	return took
}

// timed gives turns read back from a backend the start and duration their
// clients were told, in place.
func (e *ChatEntry) timed(turns []protocol.Turn) []protocol.Turn {
	for i := range turns {
		if tt, ok := e.rec.Timing[turns[i].ID]; ok {
			turns[i].StartedAt, turns[i].Duration = new(tt.StartedAt), new(tt.Duration)
		}
	}
	return turns
}

// CancelChats cancels the turns of each of the session's chats, for
// dispose to wait on without the lock; gone is true, and nothing is
// cancelled, when the session was disposed of already.
func (s *Session) CancelChats() (done []<-chan struct{}, list []*ChatEntry, gone bool) {
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

// NoteDisposed marks the session disposed of once its turns have stopped,
// and reports whether clients were told of it, so must be told it is gone.
func (s *Session) NoteDisposed() (announced bool) {
	defer s.h.Repos.leave(s) // after the session's lock goes
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
	return s.announced
}

// EndRunning takes a disposed session out of root's count of active ones,
// if it was counted there.
func (s *Session) EndRunning() {
	s.mu.Lock()
	defer s.unlock()
	if s.running {
		s.running = false
		s.h.AddActive(-1)
	}
}

// FileURI turns a path into a file URI.
func FileURI(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

// DirOf returns the path of a working directory URI; it must name a
// directory that exists.
func DirOf(uri string) (string, error) {
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

func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
