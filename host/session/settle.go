package session

import "context"

// Settle waits until what the session's changes so far set going is done:
// its outbox has handed every change on (journal, clients), the
// checkpoints of its turns are recorded, and its record is written. What
// those do may change the session again (a checkpoint's counts), so it
// waits until a look finds all three quiet. A turn's end told to a client
// comes before the rest: a check of what a turn left behind settles first.
func (s *Session) Settle(ctx context.Context) error {
	for {
		if !s.AwaitCapturesCtx(ctx) {
			return ctx.Err()
		}
		if empty := s.OutboxEmptied(); empty != nil {
			select {
			case <-empty:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		s.h.FlushRecord(s.id)
		if s.quiet() {
			return nil
		}
	}
}

// quiet reports whether the session has nothing under way to settle: no
// capture queued, nothing in its outbox.
func (s *Session) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.captures.recorded; r != nil {
		select {
		case <-r:
		default:
			return false
		}
	}
	return s.out.EmptyLocked() == nil
}
