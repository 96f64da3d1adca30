package session

// LastCheckpoint is the turn of the session's newest checkpoint as its
// record counts them (-1 for none): when this host lacks it, the refs are
// fetched from the --push-checkpoints remote (fetchMissing).
func (s *Session) LastCheckpoint() int {
	s.mu.Lock()
	defer s.unlock()
	return s.rec.Checkpoints - 1
}
