package host

import (
	"context"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/protocol"
)

func (h *Host) subscribe(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	var p protocol.SubscribeParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	snap, err := h.attach(ctx, c, p.Channel, req.ID())
	if err != nil {
		return nil, err
	}
	return &protocol.SubscribeResult{Snapshot: &snap}, nil
}

func (h *Host) unsubscribe(ctx context.Context, c *conn, req *jrpc2.Request) (any, error) {
	var p protocol.UnsubscribeParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	h.bus.unsubscribe(c, p.Channel)
	c.forget(p.Channel)
	h.poke()
	return nil, nil
}

// exists reports whether c may subscribe to channel.
func (h *Host) exists(c *conn, channel string) bool {
	if isAutomationChannel(channel) {
		return h.automationExists(c, channel)
	}
	kind, err := protocol.ClassifyChannel(channel)
	if err != nil {
		return false
	}
	switch kind {
	case protocol.ChannelRoot:
		return true
	case protocol.ChannelSession:
		s, err := h.session(c, channel)
		return err == nil && s.uri == channel
	case protocol.ChannelChat:
		_, _, err := h.chat(c, channel)
		return err == nil
	}
	return false
}

// attach subscribes c to a channel and returns its snapshot. The snapshot
// is taken under the lock of the channel's state and the subscription
// queued in its outbox right behind the changes the snapshot holds, so
// the client gets every change after fromSeq and none before it.
func (h *Host) attach(ctx context.Context, c *conn, channel, requestID string) (protocol.Snapshot, error) {
	if err := c.roomToWatch(channel); err != nil {
		return protocol.Snapshot{}, err
	}
	if isAutomationChannel(channel) {
		return h.attachAutomation(c, channel, requestID)
	}
	kind, err := protocol.ClassifyChannel(channel)
	if err != nil {
		return protocol.Snapshot{}, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	switch kind {
	case protocol.ChannelRoot:
		h.rootMu.Lock()
		state := h.root
		seq := make(chan int64, 1)
		h.rootOut.later(func() { seq <- h.bus.subscribe(c, protocol.RootURI, requestID) })
		h.unlockRoot()
		return protocol.Snapshot{Resource: protocol.RootURI, State: state, FromSeq: <-seq}, nil
	case protocol.ChannelSession:
		s, err := h.session(c, channel)
		if err != nil {
			return protocol.Snapshot{}, err
		}
		s.pin(true)
		defer s.unpin()
		s.mu.Lock()
		if s.disposed {
			s.unlock()
			return protocol.Snapshot{}, protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", channel)
		}
		state := s.state
		seq := s.subscribeLocked(c, s.uri, requestID)
		s.unlock()
		return protocol.Snapshot{Resource: s.uri, State: state, FromSeq: seq()}, nil
	case protocol.ChannelChat:
		s, e, err := h.chat(c, channel)
		if err != nil {
			return protocol.Snapshot{}, err
		}
		s.pin(true)
		defer s.unpin()
		s.loadTurns(ctx, e)
		s.mu.Lock()
		if s.disposed || s.chats[channel] != e {
			s.unlock()
			return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no chat %s", channel)
		}
		state := e.chat.State()
		seq := s.subscribeLocked(c, channel, requestID)
		s.unlock()
		return protocol.Snapshot{Resource: channel, State: state, FromSeq: seq()}, nil
	}
	return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "this host has no channel %s", channel)
}
