package session

// CancelTurns cancels the turns running in the session's chats and
// returns what is closed as each has ended.
func (s *Session) CancelTurns() []<-chan struct{} {
	s.mu.Lock()
	defer s.unlock()
	var running []<-chan struct{}
	for _, e := range s.chats {
		if !e.chat.Idle() {
			running = append(running, e.chat.Cancel())
		}
	}
	return running
}
