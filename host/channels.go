package host

import (
	"context"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// A channel is one of the states a client watches and acts on: root, a
// session, or a chat of a session. A command that names one resolves its
// URI once, here; what differs by kind is the channel's own methods.
type channel interface {
	// attach subscribes c and returns the snapshot it starts from: taken
	// under the state's lock, the subscription queued in its outbox right
	// behind the changes the snapshot holds, so the client gets every
	// change after fromSeq and none before it.
	attach(ctx context.Context, c *conn.Conn, requestID string) (protocol.Snapshot, error)
	// dispatch takes a client's action, its grant and kind checked.
	dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin)
}

type rootChannel struct{ h *Host }

type sessionChannel struct {
	s   *session
	uri string // as the client named it
}

type chatChannel struct {
	s   *session
	e   *chatEntry
	uri string
}

// resolve returns the channel uri names, as c may see it. An external
// session is opened: a client names one it was listed.
func (h *Host) resolve(c *conn.Conn, uri string) (channel, error) {
	kind, err := protocol.ClassifyChannel(uri)
	if err != nil {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	switch kind {
	case protocol.ChannelRoot:
		return rootChannel{h}, nil
	case protocol.ChannelSession:
		s, err := h.session(c, uri)
		if err != nil {
			return nil, err
		}
		return sessionChannel{s, uri}, nil
	case protocol.ChannelChat:
		s, e, err := h.chat(c, uri)
		if err != nil {
			return nil, err
		}
		return chatChannel{s, e, uri}, nil
	}
	return nil, protocol.Errorf(protocol.CodeNotFound, "this host has no channel %s", uri)
}

func (r rootChannel) attach(ctx context.Context, c *conn.Conn, requestID string) (protocol.Snapshot, error) {
	h := r.h
	h.rootMu.Lock()
	state := h.root
	seq := make(chan int64, 1)
	h.rootOut.Later(func() { seq <- h.bus.Subscribe(c, protocol.RootURI, requestID) })
	h.unlockRoot()
	return protocol.Snapshot{Resource: protocol.RootURI, State: state, FromSeq: <-seq}, nil
}

func (r rootChannel) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	r.h.dispatchRoot(c, a, origin)
}

func (sc sessionChannel) attach(ctx context.Context, c *conn.Conn, requestID string) (protocol.Snapshot, error) {
	s := sc.s
	s.pin(true)
	defer s.unpin()
	return s.attach(c, sc.uri, requestID)
}

// attach subscribes c to the session's channel and returns its snapshot;
// uri is the name it was asked under, for the error.
func (s *session) attach(c *conn.Conn, uri, requestID string) (protocol.Snapshot, error) {
	s.mu.Lock()
	if s.disposed {
		s.unlock()
		return protocol.Snapshot{}, protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", uri)
	}
	state := s.state
	seq := s.subscribeLocked(c, s.uri, requestID)
	s.unlock()
	return protocol.Snapshot{Resource: s.uri, State: state, FromSeq: seq()}, nil
}

func (sc sessionChannel) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	sc.s.dispatch(c, a, origin)
}

func (cc chatChannel) attach(ctx context.Context, c *conn.Conn, requestID string) (protocol.Snapshot, error) {
	return cc.attachView(ctx, c, requestID, 0)
}

// attachView is attach giving c the chat's last turns finished turns
// only, when turns > 0 (view.go).
func (cc chatChannel) attachView(ctx context.Context, c *conn.Conn, requestID string, turns int) (protocol.Snapshot, error) {
	s, e := cc.s, cc.e
	s.pin(true)
	defer s.unpin()
	s.loadTurns(ctx, e)
	return s.attachChat(c, cc.uri, e, requestID, turns)
}

// attachChat subscribes c to chat e's channel (uri) and returns a view of
// its last turns (view.go), unless the chat is gone meanwhile.
func (s *session) attachChat(c *conn.Conn, uri string, e *chatEntry, requestID string, turns int) (protocol.Snapshot, error) {
	s.mu.Lock()
	if s.disposed || s.chats[uri] != e {
		s.unlock()
		return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no chat %s", uri)
	}
	state, oldest := viewOf(e.chat.State(), turns)
	e.setViewLocked(c, oldest)
	seq := s.subscribeLocked(c, uri, requestID)
	s.unlock()
	return protocol.Snapshot{Resource: uri, State: state, FromSeq: seq()}, nil
}

func (cc chatChannel) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	cc.s.dispatchChat(c, cc.e, a, origin)
}
