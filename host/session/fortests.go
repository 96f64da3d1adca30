package session

import (
	"fmt"
	"slices"
	"time"
)

// What the host's tests read of a session; nothing else calls these.

// Backlog is how many changes the session's outbox holds queued.
func (s *Session) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Len()
}

// Residency says what keeps the session awake, and lists its chats.
func (s *Session) Residency(now time.Time) (string, []string) {
	s.mu.Lock()
	defer s.unlock()
	return fmt.Sprintf("asleep %v, idle %v, pins %d, last action %v, used %v, now %v",
		s.asleep, s.idleLocked(), s.pins, s.lastAction, s.used, now), slices.Clone(s.order)
}
