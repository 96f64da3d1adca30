package session

import (
	"slices"

	"github.com/ahpd/ahpd/protocol"
)

// movableLocked says why a chat cannot be moved now, or "". Called with
// the chat's session locked.
func (s *Session) movableLocked(e *ChatEntry) string {
	switch {
	case s.disposed:
		return "its session is gone"
	case s.defaultChatLocked() == e:
		return "it is its session's default chat (movable is false)"
	case !e.chat.Idle():
		return "it has a turn running or waiting, or pending messages: move it when it is done"
	}
	return ""
}

// MoveRefused is the error of a move the host will not make.
func MoveRefused(chat, why string) error {
	return protocol.Errorf(protocol.CodeInvalidParams, "cannot move chat %s: %s", protocol.Quote(chat), why)
}

// PlaceChat moves one of the session's chats after another (first without
// one) and keeps the new order; the check that it may move and the move
// are under one lock, so that no turn starts in between.
func (s *Session) PlaceChat(e *ChatEntry, after *protocol.URI) (any, error) {
	s.mu.Lock()
	defer s.unlock()
	uri := e.rec.URI
	if why := s.movableLocked(e); why != "" {
		return nil, MoveRefused(uri, why)
	}
	order, err := placed(s.catalogueLocked(), uri, after)
	if err != nil {
		return nil, err
	}
	s.reorderLocked(order)
	s.persistLocked()
	return &protocol.MoveChatResult{Session: s.uri}, nil
}

// catalogueLocked returns the chat URIs in the session's catalogue order.
func (s *Session) catalogueLocked() []string {
	out := make([]string, 0, len(s.state.Chats))
	for _, c := range s.state.Chats {
		out = append(out, c.Resource)
	}
	return out
}

// placed returns order with uri moved after the anchor, or first when
// there is none. The anchor must be another chat of order.
func placed(order []string, uri string, after *protocol.URI) ([]string, error) {
	rest := slices.DeleteFunc(slices.Clone(order), func(u string) bool { return u == uri })
	at := 0
	if after != nil {
		if *after == uri {
			return nil, MoveRefused(uri, "a chat cannot be placed after itself")
		}
		i := slices.Index(rest, *after)
		if i < 0 {
			return nil, MoveRefused(uri, "the chat to place it after, "+protocol.Quote(*after)+", is not in the destination session")
		}
		at = i + 1
	}
	return slices.Insert(rest, at, uri), nil
}

// reorderLocked makes order the session's catalogue order: its state (with
// session/chatsReordered when it moved), its record and its chats' order.
func (s *Session) reorderLocked(order []string) {
	s.emitSessionLocked(&protocol.SessionChatsReorderedAction{Chats: order}, nil)
	byURI := make(map[string]*ChatRecord, len(s.rec.Chats))
	for _, cr := range s.rec.Chats {
		byURI[cr.URI] = cr
	}
	recs := make([]*ChatRecord, 0, len(order))
	for _, uri := range order {
		if cr := byURI[uri]; cr != nil {
			recs = append(recs, cr)
		}
	}
	s.rec.Chats = recs
	s.order = slices.Clone(order)
}

// MoveSource says why the chat cannot leave the session now, or "", with
// the folder and provider a destination must share for the conversation
// to go along.
func (s *Session) MoveSource(e *ChatEntry) (why, dir, provider string) {
	s.mu.Lock()
	defer s.unlock()
	if why := s.movableLocked(e); why != "" {
		return why, "", ""
	}
	return "", s.WorkDir(), s.provider
}

// DestinationOrder checks that the session can take the chat of uri, of a
// conversation of provider kept in dir, and returns its catalogue order
// with the chat placed after the anchor (first without one).
func (s *Session) DestinationOrder(uri, provider, dir string, after *protocol.URI) ([]string, error) {
	s.mu.Lock()
	defer s.unlock()
	switch {
	case s.disposed:
		return nil, MoveRefused(uri, "the destination session is gone")
	case s.provider != provider:
		return nil, MoveRefused(uri, "the destination session runs on "+protocol.Quote(s.provider)+" and the chat's conversation is "+protocol.Quote(provider)+"'s")
	case s.WorkDir() != dir:
		return nil, MoveRefused(uri, "the destination session works in another folder, where the backend cannot carry the conversation")
	}
	return placed(s.catalogueLocked(), uri, after)
}

// Receive takes in a chat another session released, at its place in
// order (adopt, under the lock).
func (s *Session) Receive(rec *ChatRecord, state *protocol.ChatState, order []string) {
	s.mu.Lock()
	defer s.unlock()
	s.adopt(rec, state, order)
}

// Release takes an idle chat out of its session: its agent goes (its
// conversation stays with the backend), and every client is told. It
// returns the chat's record and state for the session it goes to.
func (s *Session) Release(e *ChatEntry) (*ChatRecord, *protocol.ChatState, error) {
	if err := e.chat.Close(); err != nil {
		s.h.Log.Warn("an agent did not close cleanly", "chat", e.rec.URI, "err", err)
	}
	s.mu.Lock()
	defer s.unlock()
	uri := e.rec.URI
	if s.chats[uri] != e {
		return nil, nil, MoveRefused(uri, "it is no longer in its session")
	}
	if why := s.movableLocked(e); why != "" {
		return nil, nil, MoveRefused(uri, why)
	}
	state := e.chat.State()
	delete(s.chats, uri)
	s.order = deleteString(s.order, uri)
	s.rec.Chats = slices.DeleteFunc(s.rec.Chats, func(cr *ChatRecord) bool { return cr.URI == uri })
	s.emitSessionLocked(&protocol.SessionChatRemovedAction{Chat: uri}, nil)
	s.updateActiveLocked()
	s.persistLocked()
	return e.rec, state, nil
}

// adopt takes in a chat another session released, at its place in order.
// Called with s.mu held.
func (s *Session) adopt(rec *ChatRecord, state *protocol.ChatState, order []string) {
	rec.TurnsAt = 0 // a place in the session it left
	e := s.newChat(rec, state)
	e.loaded = true // its turns came with it
	s.rec.Chats = append(s.rec.Chats, rec)
	s.emitSessionLocked(&protocol.SessionChatAddedAction{Summary: chatSummary(state)}, nil)
	s.reorderLocked(order)
	s.markUsedLocked()
	s.persistLocked()
}

// Basis is what a session made for a moved chat takes of the chat's
// old session, read at once (NewSessionBasis).
type Basis struct {
	URI          protocol.SessionURI // the old session's
	Dirs         []string
	Config       protocol.SessionConfigState
	Owner, Scope string
	Rec          *ChatRecord
	State        *protocol.ChatState
}

// NewSessionBasis says why the chat cannot leave the session now, or "",
// with what a new session for it takes of this one, read under the same
// lock as the check.
func (s *Session) NewSessionBasis(e *ChatEntry) (string, Basis) {
	s.mu.Lock()
	defer s.unlock()
	if why := s.movableLocked(e); why != "" {
		return why, Basis{}
	}
	su, _ := protocol.ParseSessionURI(s.uri)
	return "", Basis{
		URI:    su,
		Dirs:   slices.Clone(s.rec.WorkingDirectories),
		Config: *s.state.Config,
		Owner:  s.rec.Owner,
		Scope:  s.rec.Scope,
		Rec:    e.rec,
		State:  e.chat.State(),
	}
}

// Home makes the chat of rec and state the only chat of a new session
// nobody has seen yet (homeLocked, under the lock).
func (s *Session) Home(rec *ChatRecord, state *protocol.ChatState) *ChatEntry {
	s.mu.Lock()
	defer s.unlock()
	return s.homeLocked(rec, state)
}

// AnnounceHome tells everyone of a new session a chat moved into, now it
// is listed: its chat ne, the default, is no longer movable, and the
// session takes its place in the order and is kept.
func (s *Session) AnnounceHome(ne *ChatEntry) {
	s.mu.Lock()
	defer s.unlock()
	// A default chat is not movable: whoever watches the chat is told.
	s.emitChatLocked(ne.chat, &protocol.ChatMovableChangedAction{Movable: false}, nil)
	s.setSummaryLocked(s.computeSummaryLocked())
	s.noteOwnLocked()
	s.announceLocked()
	s.persistLocked()
}

// homeLocked makes the chat of rec and state the only chat of a new
// session that nobody has seen yet, its default. Called with s.mu held.
func (s *Session) homeLocked(rec *ChatRecord, state *protocol.ChatState) *ChatEntry {
	for uri := range s.chats {
		delete(s.chats, uri)
	}
	s.order, s.rec.Chats = nil, []*ChatRecord{rec}
	s.snapDue = true
	s.state = &protocol.SessionState{
		Provider: s.state.Provider, Title: state.Title, Status: s.state.Status,
		Lifecycle: protocol.SessionLifecycleReady, WorkingDirectories: s.state.WorkingDirectories,
		ActiveClients: []protocol.SessionActiveClient{}, DefaultChat: new(rec.URI), Config: s.state.Config,
	}
	moved := *rec     // the chat is still its old session's: its record is not changed under it
	moved.TurnsAt = 0 // a place in the session it left
	rec = &moved
	ne := s.newChat(rec, state)
	ne.loaded = true
	s.state.Chats = []protocol.ChatSummary{chatSummary(state)}
	s.rec.DefaultChat, s.rec.Title, s.rec.TitleFrom = rec.URI, state.Title, titleFromAgent
	s.rec.Lifecycle = string(protocol.SessionLifecycleReady)
	s.provisional = false
	s.setSummaryLocked(s.computeSummaryLocked())
	return ne
}
