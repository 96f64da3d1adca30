package session

// EndTurns ends the turns running in the session's chats with err, and
// says how many it ended.
func (s *Session) EndTurns(err error) int {
	s.mu.Lock()
	defer s.unlock()
	n := 0
	for _, e := range s.chats {
		if !e.chat.Idle() {
			e.chat.End(err)
			n++
		}
	}
	return n
}
