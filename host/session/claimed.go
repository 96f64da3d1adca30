package session

import (
	"encoding/json"
)

// unusedLocked reports whether nothing here uses the session: asleep, no
// client pinning it, not falling asleep, made and not disposed of. Such a
// copy may be made again from elsewhere (fresh, recordChanged), and its
// lease given up (releaseUnused).
func (s *Session) unusedLocked() bool {
	return s.asleep && s.pins == 0 && s.falling == nil && !s.provisional && !s.disposed
}

// replaceSession puts ns in the place of old (nil: a session new here),
// unless the host's copy changed meanwhile; old is marked disposed, so
// whoever still has it does nothing with it.
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
	s.mu.Lock()
	defer s.unlock()
	s.disposed = true
}
