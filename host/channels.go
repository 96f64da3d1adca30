package host

import (
	"context"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
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
	s   *session.Session
	uri string // as the client named it
}

type chatChannel struct {
	s   *session.Session
	e   *session.ChatEntry
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
	s.Pin(true)
	defer s.Unpin()
	return s.Attach(c, sc.uri, requestID)
}

func (sc sessionChannel) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	sc.s.Dispatch(c, a, origin)
}

func (cc chatChannel) attach(ctx context.Context, c *conn.Conn, requestID string) (protocol.Snapshot, error) {
	return cc.attachView(ctx, c, requestID, 0)
}

// attachView is attach giving c the chat's last turns finished turns
// only, when turns > 0 (view.go).
func (cc chatChannel) attachView(ctx context.Context, c *conn.Conn, requestID string, turns int) (protocol.Snapshot, error) {
	s, e := cc.s, cc.e
	s.Pin(true)
	defer s.Unpin()
	s.LoadTurns(ctx, e)
	return s.AttachChat(c, cc.uri, e, requestID, turns)
}

func (cc chatChannel) dispatch(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	cc.s.DispatchChat(c, cc.e, a, origin)
}
