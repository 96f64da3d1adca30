package session

import (
	"encoding/json"
)

// unusedLocked reports whether nothing here uses the session: asleep, no
// client pinning it, not falling asleep, made and not disposed of. Such a
// copy may be made again from elsewhere (the host's Refresh, the cluster
// part's recordChanged), and its lease given up (host/shared's upkeep).
func (s *Session) unusedLocked() bool {
	return s.asleep && s.pins == 0 && s.falling == nil && !s.provisional && !s.disposed
}

// unusedRecord encodes the session's record, when nothing holds the
// session: a copy of its own for a new copy to be made from, as the old
// copy's chat records stay the old copy's.
func (s *Session) UnusedRecord() (data []byte, unused bool, err error) {
	s.mu.Lock()
	defer s.unlock()
	if !s.unusedLocked() {
		return nil, false, nil
	}
	data, err = json.Marshal(&s.rec)
	return data, true, err
}

// MarkDisposed marks the session disposed of, so that whoever still has it
// does nothing with it.
func (s *Session) MarkDisposed() {
	defer s.h.Repos.leave(s) // after the session's lock goes
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
}
