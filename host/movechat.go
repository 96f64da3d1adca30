package host

import (
	"context"
	"slices"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Moving chats (moveChat, 1.0). A chat other than its session's default is
// movable: within its session (a new place in the catalogue), into
// another session, or into a new one whose default it becomes. A chat
// keeps its URI, its state and its conversation wherever it goes, so the
// move is the host's bookkeeping: the conversation stays with the
// backend, and the agent starts again in the new session on the next
// turn. That is why a move to another session needs the same provider and
// the same working directory (a backend files a conversation under the
// folder it ran in: the Claude CLI resumes one only from there), and a
// chat with a turn running or waiting is not moved until it is done.

// moveChat moves a chat, as the protocol's moveChat asks.
func (h *Host) moveChat(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.MoveChatParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	src, e, err := h.chat(c, p.Channel)
	if err != nil {
		return nil, err
	}
	// The chat takes its turns along: what the source's journal holds of
	// them is the source's.
	src.pin(true)
	src.loadTurns(ctx, e)
	src.unpin()
	switch d := p.Destination.(type) {
	case *protocol.ChatMoveToSessionDestination:
		dst, err := h.session(c, d.Session)
		if err != nil {
			return nil, err
		}
		if dst == src {
			return h.reorderChat(src, e, d.After)
		}
		if err := h.check(c, grants.ChatMove, h.ownerOf(c, dst.uri)); err != nil {
			return nil, err
		}
		return h.transferChat(src, dst, e, d.After)
	case *protocol.ChatMoveToNewSessionDestination:
		return h.moveToNewSession(c, src, e)
	}
	return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for moveChat: destination: a kind this host does not know")
}

// movableLocked says why a chat cannot be moved now, or "". Called with
// the chat's session locked.
func (s *session) movableLocked(e *chatEntry) string {
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

// moveRefused is the error of a move the host will not make.
func moveRefused(chat, why string) error {
	return protocol.Errorf(protocol.CodeInvalidParams, "cannot move chat %s: %s", protocol.Quote(chat), why)
}

// reorderChat puts a chat after another of its session (first without
// one), telling every client the new order.
func (h *Host) reorderChat(s *session, e *chatEntry, after *protocol.URI) (any, error) {
	s.pin(false)
	defer s.unpin()
	return s.placeChat(e, after)
}

// placeChat moves one of the session's chats after another (first without
// one) and keeps the new order; the check that it may move and the move
// are under one lock, so that no turn starts in between.
func (s *session) placeChat(e *chatEntry, after *protocol.URI) (any, error) {
	s.mu.Lock()
	defer s.unlock()
	uri := e.rec.URI
	if why := s.movableLocked(e); why != "" {
		return nil, moveRefused(uri, why)
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
func (s *session) catalogueLocked() []string {
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
			return nil, moveRefused(uri, "a chat cannot be placed after itself")
		}
		i := slices.Index(rest, *after)
		if i < 0 {
			return nil, moveRefused(uri, "the chat to place it after, "+protocol.Quote(*after)+", is not in the destination session")
		}
		at = i + 1
	}
	return slices.Insert(rest, at, uri), nil
}

// reorderLocked makes order the session's catalogue order: its state (with
// session/chatsReordered when it moved), its record and its chats' order.
func (s *session) reorderLocked(order []string) {
	s.emitSessionLocked(&protocol.SessionChatsReorderedAction{Chats: order}, nil)
	byURI := make(map[string]*chatRecord, len(s.rec.Chats))
	for _, cr := range s.rec.Chats {
		byURI[cr.URI] = cr
	}
	recs := make([]*chatRecord, 0, len(order))
	for _, uri := range order {
		if cr := byURI[uri]; cr != nil {
			recs = append(recs, cr)
		}
	}
	s.rec.Chats = recs
	s.order = slices.Clone(order)
}

// transferChat moves a chat into another session after the anchor (first
// without one).
func (h *Host) transferChat(src, dst *session, e *chatEntry, after *protocol.URI) (any, error) {
	uri := e.rec.URI
	// Both sessions stay awake and whole while the chat moves between them.
	src.pin(true)
	defer src.unpin()
	dst.pin(true)
	defer dst.unpin()

	why, srcDir, provider := src.moveSource(e)
	if why != "" {
		return nil, moveRefused(uri, why)
	}
	order, err := dst.destinationOrder(uri, provider, srcDir, after)
	if err != nil {
		return nil, err
	}

	rec, state, err := src.release(e)
	if err != nil {
		return nil, err
	}
	dst.receive(rec, state, order)
	h.setChatHome(uri, dst)
	return &protocol.MoveChatResult{Session: dst.uri}, nil
}

// moveSource says why the chat cannot leave the session now, or "", with
// the folder and provider a destination must share for the conversation
// to go along.
func (s *session) moveSource(e *chatEntry) (why, dir, provider string) {
	s.mu.Lock()
	defer s.unlock()
	if why := s.movableLocked(e); why != "" {
		return why, "", ""
	}
	return "", s.workDir(), s.provider
}

// destinationOrder checks that the session can take the chat of uri, of a
// conversation of provider kept in dir, and returns its catalogue order
// with the chat placed after the anchor (first without one).
func (s *session) destinationOrder(uri, provider, dir string, after *protocol.URI) ([]string, error) {
	s.mu.Lock()
	defer s.unlock()
	switch {
	case s.disposed:
		return nil, moveRefused(uri, "the destination session is gone")
	case s.provider != provider:
		return nil, moveRefused(uri, "the destination session runs on "+protocol.Quote(s.provider)+" and the chat's conversation is "+protocol.Quote(provider)+"'s")
	case s.workDir() != dir:
		return nil, moveRefused(uri, "the destination session works in another folder, where the backend cannot carry the conversation")
	}
	return placed(s.catalogueLocked(), uri, after)
}

// receive takes in a chat another session released, at its place in
// order (adopt, under the lock).
func (s *session) receive(rec *chatRecord, state *protocol.ChatState, order []string) {
	s.mu.Lock()
	defer s.unlock()
	s.adopt(rec, state, order)
}

// release takes an idle chat out of its session: its agent goes (its
// conversation stays with the backend), and every client is told. It
// returns the chat's record and state for the session it goes to.
func (s *session) release(e *chatEntry) (*chatRecord, *protocol.ChatState, error) {
	if err := e.chat.Close(); err != nil {
		s.h.log.Warn("an agent did not close cleanly", "chat", e.rec.URI, "err", err)
	}
	s.mu.Lock()
	defer s.unlock()
	uri := e.rec.URI
	if s.chats[uri] != e {
		return nil, nil, moveRefused(uri, "it is no longer in its session")
	}
	if why := s.movableLocked(e); why != "" {
		return nil, nil, moveRefused(uri, why)
	}
	state := e.chat.State()
	delete(s.chats, uri)
	s.order = deleteString(s.order, uri)
	s.rec.Chats = slices.DeleteFunc(s.rec.Chats, func(cr *chatRecord) bool { return cr.URI == uri })
	s.emitSessionLocked(&protocol.SessionChatRemovedAction{Chat: uri}, nil)
	s.updateActiveLocked()
	s.persistLocked()
	return e.rec, state, nil
}

// adopt takes in a chat another session released, at its place in order.
// Called with s.mu held.
func (s *session) adopt(rec *chatRecord, state *protocol.ChatState, order []string) {
	rec.TurnsAt = 0 // a place in the session it left
	e := s.newChat(rec, state)
	e.loaded = true // its turns came with it
	s.rec.Chats = append(s.rec.Chats, rec)
	s.emitSessionLocked(&protocol.SessionChatAddedAction{Summary: chatSummary(state)}, nil)
	s.reorderLocked(order)
	s.markUsedLocked()
	s.persistLocked()
}

// moveToNewSession makes a session for a chat, of the same provider,
// folders and settings as its own, where it is the default chat. The new
// session is stored before the chat leaves its old one: a move that
// cannot be kept fails and changes nothing.
func (h *Host) moveToNewSession(c *conn.Conn, src *session, e *chatEntry) (any, error) {
	if err := h.check(c, grants.SessionCreate, grants.Principal{}); err != nil {
		return nil, err
	}
	uri := e.rec.URI
	why, b := src.newSessionBasis(e)
	if why != "" {
		return nil, moveRefused(uri, why)
	}
	su, dirs, config := b.su, b.dirs, b.config
	owner, scope := b.owner, b.scope
	rec, state := b.rec, b.state

	id := su.ID + "-" + randomID()
	nsu := protocol.NewSessionURI(id)
	if p := su.Provider(); p != "" {
		nsu = protocol.ProviderSessionURI(p, id)
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeInternalError, "ahpd is shutting down")
	}
	s := h.newSession(c, nsu, src.provider, src.backend, dirs, config)
	h.mu.Unlock()
	s.rec.Owner, s.rec.Scope = owner, scope

	ne := s.home(rec, state)
	if err := s.storeNow(); err != nil {
		return nil, storeFailed(err)
	}
	if _, now, err := src.release(e); err != nil {
		if rerr := h.removeRecord(s.id); rerr != nil {
			h.log.Error("could not take away the record of a session a chat did not move to", "session", s.uri, "err", rerr)
		}
		return nil, err
	} else if now != state {
		// The chat changed (a title, its marks) while the new session was
		// stored: it takes the chat as it is now.
		ne = s.home(rec, now)
	}
	h.mu.Lock()
	h.sessions[nsu.ID] = s
	h.homes[rec.URI] = nsu.ID
	h.mu.Unlock()
	h.order.add(s, s.summary.ModifiedAt)

	s.announceHome(ne)
	h.poke()
	return &protocol.MoveChatResult{Session: s.uri}, nil
}

// newBasis is what a session made for a moved chat takes of the chat's
// old session, read at once (newSessionBasis).
type newBasis struct {
	su           protocol.SessionURI
	dirs         []string
	config       protocol.SessionConfigState
	owner, scope string
	rec          *chatRecord
	state        *protocol.ChatState
}

// newSessionBasis says why the chat cannot leave the session now, or "",
// with what a new session for it takes of this one, read under the same
// lock as the check.
func (s *session) newSessionBasis(e *chatEntry) (string, newBasis) {
	s.mu.Lock()
	defer s.unlock()
	if why := s.movableLocked(e); why != "" {
		return why, newBasis{}
	}
	su, _ := protocol.ParseSessionURI(s.uri)
	return "", newBasis{
		su:     su,
		dirs:   slices.Clone(s.rec.WorkingDirectories),
		config: *s.state.Config,
		owner:  s.rec.Owner,
		scope:  s.rec.Scope,
		rec:    e.rec,
		state:  e.chat.State(),
	}
}

// home makes the chat of rec and state the only chat of a new session
// nobody has seen yet (homeLocked, under the lock).
func (s *session) home(rec *chatRecord, state *protocol.ChatState) *chatEntry {
	s.mu.Lock()
	defer s.unlock()
	return s.homeLocked(rec, state)
}

// announceHome tells everyone of a new session a chat moved into, now it
// is listed: its chat ne, the default, is no longer movable, and the
// session takes its place in the order and is kept.
func (s *session) announceHome(ne *chatEntry) {
	s.mu.Lock()
	defer s.unlock()
	// A default chat is not movable: whoever watches the chat is told.
	s.emitChatLocked(ne.chat, &protocol.ChatMovableChangedAction{Movable: false}, nil)
	s.summary = s.computeSummaryLocked()
	at := s.summary.ModifiedAt
	s.out.Later(func() { s.h.order.move(s, at) })
	s.noteOwnLocked()
	s.announceLocked()
	s.persistLocked()
}

// homeLocked makes the chat of rec and state the only chat of a new
// session that nobody has seen yet, its default. Called with s.mu held.
func (s *session) homeLocked(rec *chatRecord, state *protocol.ChatState) *chatEntry {
	for uri := range s.chats {
		delete(s.chats, uri)
	}
	s.order, s.rec.Chats = nil, []*chatRecord{rec}
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
	s.summary = s.computeSummaryLocked()
	return ne
}

// setChatHome records the session a moved chat now lives in; its URI
// still names the session it was made in.
func (h *Host) setChatHome(chat string, s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.homes[chat] = s.id
}

// chatHome returns the session a moved chat lives in, or nil for a chat
// that lives where its URI says.
func (h *Host) chatHome(chat string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	id, ok := h.homes[chat]
	if !ok {
		return nil
	}
	return h.sessions[id]
}

// forgetChatHome forgets where a chat that is gone lived.
func (h *Host) forgetChatHome(chat string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.homes, chat)
}
