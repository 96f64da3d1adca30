package session

import (
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Attach subscribes c to the session's channel and returns its snapshot;
// uri is the name it was asked under, for the error.
func (s *Session) Attach(c *conn.Conn, uri, requestID string) (protocol.Snapshot, error) {
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

// AttachChat subscribes c to chat e's channel (uri) and returns a view of
// its last turns (view.go), unless the chat is gone meanwhile.
func (s *Session) AttachChat(c *conn.Conn, uri string, e *ChatEntry, requestID string, turns int) (protocol.Snapshot, error) {
	s.mu.Lock()
	if s.disposed || s.chats[uri] != e {
		s.unlock()
		return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no chat %s", uri)
	}
	state, oldest := ViewOf(e.chat.State(), turns)
	e.setViewLocked(c, oldest)
	seq := s.subscribeLocked(c, uri, requestID)
	s.unlock()
	return protocol.Snapshot{Resource: uri, State: state, FromSeq: seq()}, nil
}
