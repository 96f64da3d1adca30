package session

import (
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// Listed returns the session's summary when a listing for me shows it:
// of every session me may read (with all, every session), or with mine of
// those me owns; a backend's own session only when shown (the external
// rows the listing shows, by URI).
func (s *Session) Listed(mine bool, me string, all bool, shown map[string]bool) (protocol.SessionSummary, bool) {
	s.mu.Lock()
	defer s.unlock()
	// A session nobody sent a turn in is listed to nobody: VS Code makes
	// one for every empty chat it shows.
	listed := !s.disposed && !s.provisional && (!mine || (me != "" && s.rec.Owner == me))
	if listed && !all && s.rec.Owner != "" && s.rec.Owner != me {
		listed = s.targetLocked().Sharing != grants.SharePrivate
	}
	if s.rec.External {
		listed = listed && shown[s.uri]
	}
	if !listed {
		return protocol.SessionSummary{}, false
	}
	return s.summary, true
}
