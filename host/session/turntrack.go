package session

import (
	"context"

	"github.com/ahpd/ahpd/protocol"
)

// SameTurns reports whether two states of a chat have the same finished
// turns: no action changed them in between.
func SameTurns(a, b *protocol.ChatState) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Turns) != len(b.Turns) || (a.TurnsNextCursor == nil) != (b.TurnsNextCursor == nil) {
		return false
	}
	if a.TurnsNextCursor != nil && *a.TurnsNextCursor != *b.TurnsNextCursor {
		return false
	}
	return len(a.Turns) == 0 || &a.Turns[0] == &b.Turns[0] && &a.Turns[len(a.Turns)-1] == &b.Turns[len(b.Turns)-1]
}

// turnsChangedLocked notes that an action changed the chat's turns: no
// snapshot written before holds them now. Called with s.mu held.
func (e *ChatEntry) turnsChangedLocked() {
	e.turnsGen++
	e.rec.TurnsAt = 0
}

// turnsWrittenLocked notes that a snapshot of the chat at journal
// sequence at holds its turns as they were at generation gen, and reports
// whether that is news for its record. Called with s.mu held.
func (e *ChatEntry) turnsWrittenLocked(gen, at uint64) bool {
	if e.turnsGen != gen || at == 0 || e.rec.TurnsAt == at {
		return false
	}
	e.rec.TurnsAt = at
	return true
}

// restoreTurns gives a chat whose turns were forgotten its turns back from
// the journal. It reports false when the journal does not have them, and
// the backend's transcript is read instead.
func (s *Session) restoreTurns(ctx context.Context, e *ChatEntry, at uint64) bool {
	turns, cursor, err := s.h.ReadTurnsAt(ctx, s.uri, at)
	if err != nil {
		s.h.Log.Warn("could not read a chat's turns back from the journal; reading them from its backend", "chat", e.rec.URI, "err", err)
		return false
	}
	s.mu.Lock()
	defer s.unlock()
	if cs := e.chat.State(); len(cs.Turns) > 0 || cs.TurnsNextCursor != nil || e.rec.TurnsAt != at {
		return true // turns came in while it read: the live ones win
	}
	e.chat.RestoreTurns(turns, cursor)
	return true
}
