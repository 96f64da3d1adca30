package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// createChat adds a chat, under the URI the client chose, to a session.
func (h *Host) createChat(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.CreateChatParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	s, err := h.session(c, p.Channel)
	if err != nil {
		return nil, err
	}
	cu, err := protocol.ParseChatURI(p.Chat)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: chat: %v", err)
	}
	if su, err := cu.SessionURI(); err != nil || su.ID != s.ID() {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: chat: %s does not belong to session %s", p.Chat, s.URI())
	}
	if _, fork := p.Source.(*protocol.ForkChatSource); p.WorkingDirectories != nil && !fork { // a fork works where its source does
		return nil, notImplemented("a chat with working directories of its own")
	}
	if p.InitialMessage != nil {
		if why := h.workRefusal(c, s); why != "" {
			return nil, protocol.Errorf(protocol.CodePermissionDenied, "createChat: %s", why)
		}
	}

	if why := h.journalRefusal(); why != "" {
		return nil, protocol.Errorf(protocol.CodeInternalError, "createChat: %s", why)
	}
	s.Pin(true)
	defer s.Unpin()
	if p.Source != nil {
		return h.createChatFrom(ctx, c, s, &p)
	}
	rec, cs, err := s.AddChatRecord(p.Chat, chatRequest(c.Principal(), p))
	if errors.Is(err, session.ErrSameRequest) {
		// The client could not know the first got through (requests.go).
		c.Log().Debug("a client sent createChat again: answered as the first", "chat", p.Chat)
		h.metrics.repeats.Add(1)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, s.OpenChat(c, &p, rec, cs)
}

// disposeChat ends one chat of a session; the session keeps its default
// chat while it is the last one.
func (h *Host) disposeChat(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.DisposeChatParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	s, e, err := h.chat(c, p.Channel)
	if err != nil {
		return nil, err
	}
	done, ok := s.CancelChat(e)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "chat %s is the session's last chat: dispose the session instead", p.Channel)
	}
	<-done
	var errs []error
	if err := e.Chat().Close(); err != nil {
		errs = append(errs, err)
	}
	s.RemoveChat(e)
	if s.Backend() != nil && e.Record().Started {
		if err := s.Backend().Delete(ctx, plugins.Conversation{ID: e.Record().Conversation, Dir: s.WorkDir()}); err != nil {
			errs = append(errs, err)
		}
	}
	h.unsubscribeAll(p.Channel)
	h.forgetChatHome(p.Channel)
	if err := errors.Join(errs...); err != nil {
		h.log.Warn("chat disposed with errors", "chat", p.Channel, "err", err)
	}
	return nil, nil
}

// fetchTurns pages older turns into a chat with chat/turnsLoaded, so every
// client watching the chat gets the page.
func (h *Host) fetchTurns(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.FetchTurnsParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	s, e, err := h.chat(c, p.Channel)
	if err != nil {
		return nil, err
	}
	s.Pin(true)
	defer s.Unpin()
	s.LoadTurns(ctx, e)
	cursor, conv, viewed, refused := s.FetchStart(c, e, p.Cursor)
	if refused {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for fetchTurns: cursor: neither the chat's turnsNextCursor nor one a view of it was given; subscribe to the chat again")
	}
	if viewed {
		return &protocol.FetchTurnsResult{}, nil
	}
	if cursor == nil {
		return &protocol.FetchTurnsResult{}, nil // everything is loaded
	}
	end, err := session.ParseTurnCursor(*cursor)
	if err != nil || s.Backend() == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for fetchTurns: cursor: %v", err)
	}
	turns, err := s.Backend().Turns(ctx, conv)
	if err != nil {
		return nil, fmt.Errorf("reading the chat's turns: %w", err)
	}
	turns = s.WithCutTurns(e, turns)
	end = min(end, len(turns))
	start := max(0, end-h.opts.TurnWindow)
	page := &protocol.ChatTurnsLoadedAction{Turns: turns[start:end]}
	if start > 0 {
		page.TurnsNextCursor = new(session.TurnCursor(start))
	}
	s.SendTurnsPage(e, page)
	return &protocol.FetchTurnsResult{}, nil
}
