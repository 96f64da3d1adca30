package session

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// OpenChat is the rest of createChat, all under the session's lock: the
// chat stored (addChatRecord) is made and told of, with its first turn
// started when the client sent a message with it. A session disposed of
// meanwhile gets none.
func (s *Session) OpenChat(c *conn.Conn, p *protocol.CreateChatParams, rec *ChatRecord, cs *protocol.ChatState) error {
	s.mu.Lock()
	defer s.unlock()
	if s.disposed {
		return protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", p.Channel)
	}
	now := cs.ModifiedAt
	e := s.newChat(rec, cs)
	e.loaded = true // a new conversation has no turns to read
	s.emitSessionLocked(&protocol.SessionChatAddedAction{Summary: chatSummary(cs)}, nil)
	if p.InitialMessage != nil {
		start := &protocol.ChatTurnStartedAction{TurnID: "turn-" + RandomID(), StartedAt: now, Message: *p.InitialMessage}
		if s.emitChatLocked(e.chat, start, nil) {
			rec.Senders = map[string]string{start.TurnID: c.Client()}
			e.chat.React(start)
		}
	}
	if (s.h.Clustered || s.h.Journaled && len(cs.Turns) > 0) && e.snapDue {
		// Its state in the journal at once, as a session's made
		// (createSession): another host's client watches it from there,
		// and a fork's turns, which no action brought, come back from
		// there after a restart.
		s.snapshotLocked(e, e.chat.State())
		e.snapDue = false
	}
	return nil
}

// ErrSameRequest is AddChatRecord's answer to the request that made the
// chat, sent again: the chat is there as it asked.
var ErrSameRequest = errors.New("the chat was made by this request already")

// AddChatRecord adds a new chat to the session's record and stores it:
// a chat is stored before anyone is told of it, so one a restart would
// lose is not added. The record lists it while it is written, so a write
// of the record meanwhile keeps it too; a failed write takes it out again.
// request is the digest of the createChat request (ChatRecord.Request).
func (s *Session) AddChatRecord(uri, request string) (*ChatRecord, *protocol.ChatState, error) {
	return s.addChatRecord(uri, request, nil)
}

// addChatRecord is AddChatRecord, with from, if set, making the new
// record and state those of a chat made from another (fork.go).
func (s *Session) addChatRecord(uri, request string, from func(*ChatRecord, *protocol.ChatState)) (*ChatRecord, *protocol.ChatState, error) {
	s.mu.Lock()
	i := slices.IndexFunc(s.rec.Chats, func(cr *ChatRecord) bool { return cr.URI == uri })
	switch {
	case request != "" && i >= 0 && s.rec.Chats[i].Request == request && !s.disposed:
		s.unlock()
		return nil, nil, ErrSameRequest
	case s.disposed:
		s.unlock()
		return nil, nil, protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", s.uri)
	case s.stopping:
		s.unlock()
		return nil, nil, protocol.Errorf(protocol.CodeInternalError, "ahpd is shutting down")
	case s.chats[uri] != nil || i >= 0:
		s.unlock()
		return nil, nil, protocol.Errorf(protocol.CodeAlreadyExists, "chat %s already exists", uri)
	}
	now := protocol.FormatTime(s.h.Now())
	rec := &ChatRecord{URI: uri, Title: "Chat " + strconv.Itoa(len(s.rec.Chats)+1), ModifiedAt: now,
		Conversation: s.id + "-" + RandomID(), Request: request}
	cs := &protocol.ChatState{
		Resource: uri, Title: rec.Title, Status: protocol.StatusIdle, ModifiedAt: now,
		Origin: &protocol.ChatOriginUser{}, Turns: []protocol.Turn{}, Movable: new(true),
	}
	if from != nil {
		from(rec, cs)
	}
	s.rec.Chats = append(s.rec.Chats, rec)
	keep := !(s.provisional && !s.stored)
	s.unlock()
	if !keep {
		return rec, cs, nil
	}
	if err := s.StoreNow(); err != nil {
		s.mu.Lock()
		s.rec.Chats = slices.DeleteFunc(s.rec.Chats, func(cr *ChatRecord) bool { return cr == rec })
		s.unlock()
		return nil, nil, StoreFailed(err)
	}
	return rec, cs, nil
}

// removeChatLocked takes a chat whose agent has gone out of the session,
// telling every client; the first chat left becomes the default when it
// was. Called with s.mu held.
func (s *Session) removeChatLocked(e *ChatEntry) {
	uri := e.rec.URI
	if s.chats[uri] != e {
		return
	}
	delete(s.chats, uri)
	s.order = deleteString(s.order, uri)
	s.rec.Chats = slices.DeleteFunc(slices.Clone(s.rec.Chats), func(cr *ChatRecord) bool { return cr.URI == uri }) // a copy: the old one may be shared
	if s.rec.DefaultChat == uri {
		s.rec.DefaultChat = s.order[0]
	}
	for _, a := range protocol.MirrorInputs(s.state, uri, nil) { // nothing waits in a chat that is gone
		s.emitSessionLocked(a, nil)
	}
	s.emitSessionLocked(&protocol.SessionChatRemovedAction{Chat: uri}, nil)
	if s.state.DefaultChat == nil {
		s.emitSessionLocked(&protocol.SessionDefaultChatChangedAction{DefaultChat: new(s.order[0])}, nil)
		if next := s.chats[s.order[0]]; next != nil {
			// A default chat is not movable.
			s.emitChatLocked(next.chat, &protocol.ChatMovableChangedAction{Movable: false}, nil)
		}
	}
	s.updateActiveLocked()
	s.persistLocked()
}

// CancelChat cancels a chat's turn, the first step of disposing of it,
// and returns what closes once the turn has ended. It cancels nothing,
// and reports false, when the chat is the session's last: a session keeps
// one.
func (s *Session) CancelChat(e *ChatEntry) (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.unlock()
	if len(s.chats) == 1 {
		return nil, false
	}
	return e.chat.Cancel(), true
}

// RemoveChat is removeChatLocked under the session's lock: disposeChat
// takes the chat out once its agent has closed.
func (s *Session) RemoveChat(e *ChatEntry) {
	s.mu.Lock()
	s.removeChatLocked(e)
	s.unlock()
}

func deleteString(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// FetchStart is fetchTurns' look at the chat under the session's lock:
// the chat's cursor and its conversation, to read older turns from the
// backend with. A cursor asked for that is not the chat's must be one a
// view of it was given (view.go), whose page is sent here (viewed): the
// protocol has a host refuse any other (refused), even once every turn is
// loaded.
func (s *Session) FetchStart(c *conn.Conn, e *ChatEntry, asked *string) (cursor *string, conv plugins.Conversation, viewed, refused bool) {
	s.mu.Lock()
	defer s.unlock()
	cs := e.chat.State()
	cursor = cs.TurnsNextCursor
	conv = plugins.Conversation{ID: e.rec.Conversation, Dir: s.WorkDir()}
	if asked != nil && (cursor == nil || *asked != *cursor) {
		page, ok := viewPage(cs, *asked)
		if ok {
			e.setViewLocked(c, -1)
			s.emitChatLocked(e.chat, page, nil)
		}
		return cursor, conv, ok, !ok
	}
	return cursor, conv, false, false
}

// WithCutTurns is turns read from the backend as the chat shows them:
// timed, with the turns a stop cut short put back. Both read the chat's
// record, under the session's lock.
func (s *Session) WithCutTurns(e *ChatEntry, turns []protocol.Turn) []protocol.Turn {
	s.mu.Lock()
	defer s.unlock()
	return e.withCut(e.timed(e.visible(turns)))
}

// SendTurnsPage sends a page of older turns read from the backend to the
// chat's clients. A view that lacks turns the chat holds gets them with
// the page, before which they go (view.go); then no view lacks any.
func (s *Session) SendTurnsPage(e *ChatEntry, page *protocol.ChatTurnsLoadedAction) {
	s.mu.Lock()
	defer s.unlock()
	if lack := e.viewsLackLocked(e.chat.State()); len(lack) > 0 {
		page.Turns = append(slices.Clip(page.Turns), lack...)
	}
	clear(e.views)
	s.emitChatLocked(e.chat, page, nil)
}

// A turn cursor is the index of the oldest turn loaded.
func TurnCursor(index int) string { return "before:" + strconv.Itoa(index) }

func ParseTurnCursor(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "before:"))
	if err != nil || !strings.HasPrefix(s, "before:") || n < 0 {
		return 0, errors.New("not a turn cursor of this host")
	}
	return n, nil
}
