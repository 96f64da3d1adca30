package session

import (
	"encoding/json"

	"github.com/ahpd/ahpd/protocol"
)

// SnapshotEntry is a channel's state, or, with Older, turns of a chat
// older than those of the snapshot entry before it: a chat holding more
// than one entry can is written as its newest turns and then pages of
// older ones, which replay pages in with chat/turnsLoaded.
type SnapshotEntry struct {
	Channel string          `json:"channel"`
	State   json.RawMessage `json:"state,omitempty"`
	Older   json.RawMessage `json:"older,omitempty"`
	// Bare, on a chat's snapshot, says its state is written without its
	// finished turns, which are as in the snapshot at journal sequence
	// TurnsAt, or, with none, the backend's alone (turntrack.go).
	Bare    bool   `json:"bare,omitempty"`
	TurnsAt uint64 `json:"turnsAt,omitempty"`
}

// SnapshotPage is the most turn bytes one snapshot entry carries: well
// under the journal's entry bound (a MiB unless the server says less).
const SnapshotPage = 256 << 10

// SnapshotEntries encodes a channel's state as the journal entries of a
// snapshot at serverSeq seq: its state, and a chat's older turns in pages
// after it.
func SnapshotEntries(seq int64, channel string, state protocol.ChannelState) ([][]byte, error) {
	var older [][]protocol.Turn
	if cs, ok := state.(*protocol.ChatState); ok && len(cs.Turns) > 0 {
		var newest protocol.ChatState
		newest, older = pageTurns(cs)
		state = &newest
	}
	data, err := json.Marshal(state)
	if err != nil {
		return nil, err
	}
	entry, err := json.Marshal(map[string]any{"serverSeq": seq, "snapshot": SnapshotEntry{Channel: channel, State: data}})
	if err != nil {
		return nil, err
	}
	entries := [][]byte{entry}
	for _, page := range older {
		data, err := json.Marshal(page)
		if err != nil {
			return nil, err
		}
		entry, err := json.Marshal(map[string]any{"serverSeq": seq, "snapshot": SnapshotEntry{Channel: channel, Older: data}})
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry)
	}
	return entries, nil
}

// pageTurns splits a chat's turns into pages of about snapshotPage bytes:
// the chat with its newest page, and the older pages, newest first.
func pageTurns(cs *protocol.ChatState) (protocol.ChatState, [][]protocol.Turn) {
	turns := cs.Turns
	var pages [][]protocol.Turn
	end, size := len(turns), 0
	for i := len(turns) - 1; i >= 0; i-- {
		n := turnSize(&turns[i])
		if size > 0 && size+n > SnapshotPage {
			pages = append(pages, turns[i+1:end])
			end, size = i+1, 0
		}
		size += n
	}
	pages = append(pages, turns[:end])
	newest := *cs
	newest.Turns = pages[0]
	return newest, pages[1:]
}

// turnSize is about how many bytes a turn takes encoded.
func turnSize(t *protocol.Turn) int {
	data, err := json.Marshal(t)
	if err != nil {
		return 0
	}
	return len(data)
}

// snapshotLocked queues writing a chat's state to the session's journal,
// before the action that follows it in the outbox.
func (s *Session) snapshotLocked(e *ChatEntry, state protocol.ChannelState) {
	gen := e.turnsGen
	s.out.Later(func() {
		seq := s.h.Bus.Current() // every action of the session before it is numbered, none after
		entries, err := SnapshotEntries(seq, e.rec.URI, state)
		if err != nil {
			s.h.Log.Error("could not encode a snapshot for the journal", "session", s.uri, "channel", e.rec.URI, "err", err)
			return
		}
		seqs, err := s.h.AppendDurably(s.uri, entries)
		if err != nil {
			return // the host stops
		}
		s.mu.Lock()
		_ = e.turnsWrittenLocked(gen, seqs[0]) // the chat's next action follows, and is kept with it
		s.unlock()
	})
}
