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
