package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ahpd/ahpd/protocol"
)

// Where a chat's finished turns are kept.
//
// The journal holds every turn a client saw, as it saw it, and wins over
// the backend's transcript, which may tell a turn otherwise (a cancelled
// reply it kept whole, reasoning it did not keep) or not at all. A
// session falling asleep forgets its chats' turns (ForgetTurns), to keep
// its heap small, and gets them back from the journal when it needs them
// (loadTurns), without an action: for the journal the turns never went.
//
// A snapshot of a chat in the journal holds its turns (snapshotEntries),
// or, when they have not changed since a snapshot that holds them, says
// where that one is (snapshotEntry.TurnsAt): a restart point of a session
// whose turns are as they were is small. The chat's record keeps where its
// turns are now (chatRecord.TurnsAt), set when a snapshot holding them is
// written and cleared when an action changes them; a chat forgets its turns
// only while it is set. The backend's transcript is read only for a chat
// the journal has no turns of: one from before the journal, or one whose
// snapshot retention took.

// sameTurns reports whether two states of a chat have the same finished
// turns: no action changed them in between.
func sameTurns(a, b *protocol.ChatState) bool {
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
func (e *chatEntry) turnsChangedLocked() {
	e.turnsGen++
	e.rec.TurnsAt = 0
}

// turnsWrittenLocked notes that a snapshot of the chat at journal
// sequence at holds its turns as they were at generation gen, and reports
// whether that is news for its record. Called with s.mu held.
func (e *chatEntry) turnsWrittenLocked(gen, at uint64) bool {
	if e.turnsGen != gen || at == 0 || e.rec.TurnsAt == at {
		return false
	}
	e.rec.TurnsAt = at
	return true
}

// errNoTurnsThere is readTurnsAt's error when the journal has no snapshot
// of a chat's turns where it was said to be: retention took it.
var errNoTurnsThere = errors.New("the journal no longer holds the snapshot of the chat's turns")

// readTurnsAt reads the finished turns of the chat snapshot at journal
// sequence at of a session's journal, with the older pages after it.
func (h *Host) readTurnsAt(ctx context.Context, session string, at uint64) ([]protocol.Turn, *string, error) {
	var cs *protocol.ChatState
	for after := at - 1; ; {
		entries, err := h.opts.Journal.Read(ctx, session, after, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the chat's turns from the journal: %w", err)
		}
		for _, e := range entries {
			je, err := decodeEntry(e.Data)
			switch {
			case cs == nil && (e.Seq != at || err != nil || je.snap == nil || je.snap.State == nil || je.snap.Bare):
				return nil, nil, errNoTurnsThere
			case cs == nil:
				cs = new(protocol.ChatState)
				if err := json.Unmarshal(je.snap.State, cs); err != nil {
					return nil, nil, fmt.Errorf("decoding the chat's turns from the journal: %w", err)
				}
				continue
			case err != nil || je.snap == nil || je.snap.Older == nil:
				return cs.Turns, cs.TurnsNextCursor, nil // the snapshot's pages end here
			}
			var older []protocol.Turn
			if err := json.Unmarshal(je.snap.Older, &older); err != nil {
				return nil, nil, fmt.Errorf("decoding the chat's turns from the journal: %w", err)
			}
			cs = protocol.Apply(cs, &protocol.ChatTurnsLoadedAction{Turns: older, TurnsNextCursor: cs.TurnsNextCursor}).(*protocol.ChatState)
		}
		if len(entries) < 64 {
			if cs == nil {
				return nil, nil, errNoTurnsThere
			}
			return cs.Turns, cs.TurnsNextCursor, nil
		}
		after = entries[len(entries)-1].Seq
	}
}

// turnsResolver returns what gives a replayer of a session the turns a
// snapshot points to.
func (h *Host) turnsResolver(ctx context.Context, session string) func(uint64) ([]protocol.Turn, *string, error) {
	return func(at uint64) ([]protocol.Turn, *string, error) { return h.readTurnsAt(ctx, session, at) }
}

// restoreTurns gives a chat whose turns were forgotten its turns back from
// the journal. It reports false when the journal does not have them, and
// the backend's transcript is read instead.
func (s *session) restoreTurns(ctx context.Context, e *chatEntry, at uint64) bool {
	turns, cursor, err := s.h.readTurnsAt(ctx, s.uri, at)
	if err != nil {
		s.h.log.Warn("could not read a chat's turns back from the journal; reading them from its backend", "chat", e.rec.URI, "err", err)
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
