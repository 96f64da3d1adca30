package session

import (
	"github.com/ahpd/ahpd/protocol"
)

// DropActiveClient removes clientID from the session's active clients,
// when it is one.
func (s *Session) DropActiveClient(clientID string) {
	s.mu.Lock()
	defer s.unlock()
	for _, ac := range s.state.ActiveClients {
		if ac.ClientID == clientID {
			s.emitSessionLocked(&protocol.SessionActiveClientRemovedAction{ClientID: clientID}, nil)
			return
		}
	}
}

// UnusedBy reports whether the session is one of clients' making that
// none of them sent a turn in.
func (s *Session) UnusedBy(clients map[string]bool) bool {
	s.mu.Lock()
	defer s.unlock()
	return s.provisional && !s.disposed && clients[s.creatorID]
}
