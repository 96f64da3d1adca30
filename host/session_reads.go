package host

import "github.com/ahpd/ahpd/protocol"

// Reads of a session's state for the rest of the host, each under the
// session's lock, taken and let go here: code outside the session's own
// methods does not take its lock (docs/ARCHITECTURE.md, "Lock rules").

// owner is the principal the session's record names as its owner, as
// written ("" for none).
func (s *session) owner() string {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Owner
}

// folder is the session's folder: where its work is done.
func (s *session) folder() string {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.folder()
}

// currentSummary is the session's summary as it is now.
func (s *session) currentSummary() protocol.SessionSummary {
	s.mu.Lock()
	defer s.unlock()
	return s.summary
}

// unused reports whether nothing holds the session: asleep, unpinned,
// not falling asleep, stored and not disposed of (unusedLocked).
func (s *session) unused() bool {
	s.mu.Lock()
	defer s.unlock()
	return s.unusedLocked()
}

// persist writes the session's record (persistLocked).
func (s *session) persist() {
	s.mu.Lock()
	defer s.unlock()
	s.persistLocked()
}

// chatOf returns the session's chat of a URI, or nil.
func (s *session) chatOf(uri string) *chatEntry {
	s.mu.Lock()
	defer s.unlock()
	return s.chatLocked(uri)
}
