package session

// WorkingDirs is a copy of the folders the session's record names, for
// routing to read after the lock is let go.
func (s *Session) WorkingDirs() []string {
	s.mu.Lock()
	defer s.unlock()
	return append([]string(nil), s.rec.WorkingDirectories...)
}
