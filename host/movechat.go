package host

import (
	"context"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
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
	src.Pin(true)
	src.LoadTurns(ctx, e)
	src.Unpin()
	switch d := p.Destination.(type) {
	case *protocol.ChatMoveToSessionDestination:
		dst, err := h.session(c, d.Session)
		if err != nil {
			return nil, err
		}
		if dst == src {
			return h.reorderChat(src, e, d.After)
		}
		if err := h.check(c, grants.ChatMove, h.targetOf(c, dst.URI())); err != nil {
			return nil, err
		}
		return h.transferChat(src, dst, e, d.After)
	case *protocol.ChatMoveToNewSessionDestination:
		return h.moveToNewSession(c, src, e)
	}
	return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for moveChat: destination: a kind this host does not know")
}

// reorderChat puts a chat after another of its session (first without
// one), telling every client the new order.
func (h *Host) reorderChat(s *session.Session, e *session.ChatEntry, after *protocol.URI) (any, error) {
	s.Pin(false)
	defer s.Unpin()
	return s.PlaceChat(e, after)
}

// transferChat moves a chat into another session after the anchor (first
// without one).
func (h *Host) transferChat(src, dst *session.Session, e *session.ChatEntry, after *protocol.URI) (any, error) {
	uri := e.Record().URI
	// Both sessions stay awake and whole while the chat moves between them.
	src.Pin(true)
	defer src.Unpin()
	dst.Pin(true)
	defer dst.Unpin()

	why, srcDir, provider := src.MoveSource(e)
	if why != "" {
		return nil, session.MoveRefused(uri, why)
	}
	order, err := dst.DestinationOrder(uri, provider, srcDir, after)
	if err != nil {
		return nil, err
	}

	rec, state, err := src.Release(e)
	if err != nil {
		return nil, err
	}
	dst.Receive(rec, state, order)
	h.setChatHome(uri, dst)
	return &protocol.MoveChatResult{Session: dst.URI()}, nil
}

// moveToNewSession makes a session for a chat, of the same provider,
// folders and settings as its own, where it is the default chat. The new
// session is stored before the chat leaves its old one: a move that
// cannot be kept fails and changes nothing.
func (h *Host) moveToNewSession(c *conn.Conn, src *session.Session, e *session.ChatEntry) (any, error) {
	if err := h.check(c, grants.SessionCreate, grants.Target{}); err != nil {
		return nil, err
	}
	uri := e.Record().URI
	why, b := src.NewSessionBasis(e)
	if why != "" {
		return nil, session.MoveRefused(uri, why)
	}
	su, dirs, config := b.URI, b.Dirs, b.Config
	owner, scope := b.Owner, b.Scope
	rec, state := b.Rec, b.State

	id := su.ID + "-" + session.RandomID()
	nsu := protocol.NewSessionURI(id)
	if p := su.Provider(); p != "" {
		nsu = protocol.ProviderSessionURI(p, id)
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeInternalError, "ahpd is shutting down")
	}
	s := h.newSession(c, session.Spec{URI: nsu, Provider: src.Provider(), Backend: src.Backend(),
		Dirs: dirs, Config: config, Owner: owner, Scope: scope})
	h.mu.Unlock()

	ne := s.Home(rec, state)
	if err := s.StoreNow(); err != nil {
		return nil, session.StoreFailed(err)
	}
	if _, now, err := src.Release(e); err != nil {
		if rerr := h.removeRecord(s.ID()); rerr != nil {
			h.log.Error("could not take away the record of a session a chat did not move to", "session", s.URI(), "err", rerr)
		}
		return nil, err
	} else if now != state {
		// The chat changed (a title, its marks) while the new session was
		// stored: it takes the chat as it is now.
		ne = s.Home(rec, now)
	}
	h.mu.Lock()
	h.sessions[nsu.ID] = s
	h.homes[rec.URI] = nsu.ID
	h.mu.Unlock()
	h.order.Add(s)

	s.AnnounceHome(ne)
	h.poke()
	return &protocol.MoveChatResult{Session: s.URI()}, nil
}

// setChatHome records the session a moved chat now lives in; its URI
// still names the session it was made in.
func (h *Host) setChatHome(chat string, s *session.Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.homes[chat] = s.ID()
}

// chatHome returns the session a moved chat lives in, or nil for a chat
// that lives where its URI says.
func (h *Host) chatHome(chat string) *session.Session {
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
