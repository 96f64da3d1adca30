package host

import (
	"context"
	"errors"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// createChatFrom is createChat with a source: a fork of one of the
// session's chats at one of its turns, or a side chat with the chat up to
// that turn as its context (host/session/fork.go). The session's backend
// copies the conversation first; the chat is stored and told of after,
// as any chat, and a copy no chat holds is deleted again.
func (h *Host) createChatFrom(ctx context.Context, c *conn.Conn, s *session.Session, p *protocol.CreateChatParams) (any, error) {
	var srcURI string
	var kind string
	switch so := p.Source.(type) {
	case *protocol.ForkChatSource:
		srcURI, kind = so.Chat, "fork"
	case *protocol.SideChatSource:
		srcURI, kind = so.Chat, "sideChat"
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source: a source is of kind \"fork\" or \"sideChat\"")
	}
	if srcURI == p.Chat {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.chat names the chat being created")
	}
	// A chat moved in keeps its URI, which may spell another session:
	// the session's own list of chats decides.
	src := s.ChatOf(srcURI)
	if src == nil {
		if other, _, err := h.chat(c, srcURI); err == nil && other != s {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.chat %s is a chat of session %s, not of %s: a chat is made from a chat of its own session", srcURI, other.URI(), s.URI())
		}
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.chat: session %s has no chat %s", s.URI(), srcURI)
	}
	b := s.Backend()
	if b == nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "createChat: provider %q is not available on this host", s.Provider())
	}
	fork, side := plugins.Forks(b)
	if kind == "fork" && !fork || kind == "sideChat" && !side {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source: provider %q does not offer a %s (its agent's capabilities.multipleChats.%s is not true)", s.Provider(), map[string]string{"fork": "fork", "sideChat": "side chat"}[kind], kind)
	}
	fp, err := s.ForkFrom(ctx, src, p.Source)
	if err != nil {
		return nil, err
	}
	fp.Options.Into = plugins.Conversation{ID: s.ID() + "-" + session.RandomID(), Dir: fp.Options.From.Dir}
	// The copy is the host's own before the backend writes it: else the
	// catalogue, seeing a transcript no session holds, lists it as an
	// external session.
	own := []catalogue.Key{{Provider: s.Provider(), ID: fp.Options.Into.ID}}
	h.ext.NoteOwn(own)
	conv, err := b.(plugins.Forker).Fork(ctx, fp.Options)
	if err == nil && conv != fp.Options.Into.ID {
		// The agent named the copy itself (ACP's session/fork).
		own = append(own, catalogue.Key{Provider: s.Provider(), ID: conv})
		h.ext.NoteOwn(own[1:])
	}
	if err != nil {
		h.ext.ForgetOwn(own)
	}
	switch {
	case errors.Is(err, plugins.ErrNotFound):
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source.turnId: the %s agent has no record of turn %s of %s to start from: %v", s.Provider(), fp.Options.TurnID, srcURI, err)
	case errors.Is(err, plugins.ErrCannotFork):
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for createChat: source: %v", err)
	case err != nil:
		return nil, protocol.Errorf(protocol.CodeInternalError, "createChat: copying the conversation of %s: %v", srcURI, err)
	}
	copied := plugins.Conversation{ID: conv, Dir: fp.Options.Into.Dir}
	rec, cs, err := s.AddForkedChatRecord(p.Chat, chatRequest(c.Principal(), *p), conv, fp)
	if err != nil {
		if derr := b.Delete(ctx, copied); derr != nil {
			h.log.Warn("could not delete the copy of a conversation no chat holds", "chat", p.Chat, "conversation", conv, "err", derr)
		}
		h.ext.ForgetOwn(own) // a repeated request's copy too: the first's chat holds its own
	}
	if errors.Is(err, session.ErrSameRequest) {
		// The client could not know the first got through (requests.go).
		c.Log().Debug("a client sent createChat again: answered as the first", "chat", p.Chat)
		h.metrics.repeats.Add(1)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, s.OpenChat(c, p, rec, cs)
}
