package session

import (
	"github.com/ahpd/ahpd/protocol"
)

// TakesRecord reports whether the session may be made again from another
// host's record of revision rev: nothing here holds it, and it was made
// from an older revision.
func (s *Session) TakesRecord(rev uint64) bool {
	s.mu.Lock()
	defer s.unlock()
	unused, newer := s.unusedLocked(), s.recordRev >= rev
	return unused && !newer
}

// ListedSummary is the session's summary with whether it is a backend's
// own, which root's list does not show, both read at once.
func (s *Session) ListedSummary() (sum protocol.SessionSummary, external bool) {
	s.mu.Lock()
	defer s.unlock()
	return s.summary, s.rec.External
}

// MarkRemoved marks a session another host disposed of as disposed here,
// so whoever still has it does nothing with it, and returns its URI and
// its chats' for their subscribers to be dropped.
func (s *Session) MarkRemoved() (uri string, chats []string) {
	defer s.h.Repos.leave(s) // after the session's lock goes
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
	return s.uri, append([]string(nil), s.order...)
}
