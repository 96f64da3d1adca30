package session

import (
	"github.com/ahpd/ahpd/grants"

	"github.com/ahpd/ahpd/protocol"
)

// AnnounceCreated is what createSession does under the session's lock
// once the session is made: the active client the client named is set,
// and in a cluster a restart point is queued.
func (s *Session) AnnounceCreated(active *protocol.SessionActiveClient) {
	s.mu.Lock()
	defer s.unlock()
	if active != nil {
		s.emitSessionLocked(&protocol.SessionActiveClientSetAction{ActiveClient: *active}, nil)
	}
	if s.h.Clustered && s.snapDue {
		// Its state in the journal at once: a client of another host
		// watches it from there, and may subscribe before its first turn.
		s.restartPointLocked("", nil)
	}
}

func PrincipalString(p grants.Principal) string {
	if p.IsZero() {
		return ""
	}
	return p.String()
}

// Commit is commitLocked under the session's lock: keep makes a session
// the host's own, and announces it, once its record is stored.
func (s *Session) Commit() error {
	s.mu.Lock()
	defer s.unlock()
	return s.commitLocked()
}
