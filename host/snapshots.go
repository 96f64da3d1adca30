package host

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// Snapshots in the journal, and replaying a session from them.
//
// A session's journal holds its actions; a state made some other way (a
// session built from its record, a chat created or moved in, a chat
// that forgot its turns falling asleep) is written to it as a snapshot,
// just before the state's next action, so that the reducers rebuild the
// session's state at any serverSeq from the last snapshot before it and
// the actions after. ahpd/replaySession answers that state, and a host
// starting again rebuilds its sessions from their restart points
// (restart.go).

// journalEntry is an entry of a session's journal: an action envelope, a
// snapshot of one of its channels (or more of a chat's turns than fit in
// one entry with it), or the session waking or falling asleep, each
// placed after the action numbered seq.
type journalEntry struct {
	env       *protocol.ActionEnvelope
	snap      *snapshotEntry
	residency string // "wake" or "sleep"
	seq       int64
}

func decodeEntry(data []byte) (journalEntry, error) {
	// Most entries are actions: decoded once, as envelopes, when neither
	// key of the other kinds is in them. A string holding such a key has
	// its quotes escaped and does not match; an object that has one as a
	// key takes the slow path, which tells them apart.
	if !bytes.Contains(data, snapshotKey) && !bytes.Contains(data, residencyKey) {
		env := new(protocol.ActionEnvelope)
		if err := json.Unmarshal(data, env); err != nil {
			return journalEntry{}, err
		}
		return journalEntry{env: env, seq: env.ServerSeq}, nil
	}
	var probe struct {
		ServerSeq int64          `json:"serverSeq"`
		Snapshot  *snapshotEntry `json:"snapshot"`
		Residency string         `json:"residency"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return journalEntry{}, err
	}
	if probe.Snapshot != nil || probe.Residency != "" {
		return journalEntry{snap: probe.Snapshot, residency: probe.Residency, seq: probe.ServerSeq}, nil
	}
	env := new(protocol.ActionEnvelope)
	if err := json.Unmarshal(data, env); err != nil {
		return journalEntry{}, err
	}
	return journalEntry{env: env, seq: env.ServerSeq}, nil
}

var (
	snapshotKey  = []byte(`"snapshot":`)
	residencyKey = []byte(`"residency":`)
)

// writeResidency records in a session's journal that it woke or fell
// asleep, for its timeline.
func (h *Host) writeResidency(session, what string) {
	if h.opts.Journal == nil {
		return
	}
	seq := h.bus.Current()
	entry, err := json.Marshal(map[string]any{"serverSeq": seq, "residency": what})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, appendTimeout)
	defer cancel()
	if _, err := h.opts.Journal.Append(ctx, session, entry); err != nil {
		h.journalFailed(session, err, seq)
	}
}

// snapshotEntry is a channel's state, or, with Older, turns of a chat
// older than those of the snapshot entry before it: a chat holding more
// than one entry can is written as its newest turns and then pages of
// older ones, which replay pages in with chat/turnsLoaded.
type snapshotEntry struct {
	Channel string          `json:"channel"`
	State   json.RawMessage `json:"state,omitempty"`
	Older   json.RawMessage `json:"older,omitempty"`
}

// snapshotPage is the most turn bytes one snapshot entry carries: well
// under the journal's entry bound (a MiB unless the server says less).
const snapshotPage = 256 << 10

// snapshotEntries encodes a channel's state as the journal entries of a
// snapshot at serverSeq seq. It fails for a state with one turn too large
// for an entry.
func snapshotEntries(seq int64, channel string, state protocol.ChannelState) ([][]byte, error) {
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
	entry, err := json.Marshal(map[string]any{"serverSeq": seq, "snapshot": snapshotEntry{Channel: channel, State: data}})
	if err != nil {
		return nil, err
	}
	entries := [][]byte{entry}
	for _, page := range older {
		data, err := json.Marshal(page)
		if err != nil {
			return nil, err
		}
		entry, err := json.Marshal(map[string]any{"serverSeq": seq, "snapshot": snapshotEntry{Channel: channel, Older: data}})
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
		if size > 0 && size+n > snapshotPage {
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

// snapshotLocked queues writing a channel's state to the session's
// journal, before the action that follows it in the outbox.
func (s *session) snapshotLocked(channel string, state protocol.ChannelState) {
	s.out.later(func() { s.h.writeSnapshot(s.uri, channel, state) })
}

func (h *Host) writeSnapshot(session, channel string, state protocol.ChannelState) {
	seq := h.bus.Current() // every action of the session before it is numbered, none after
	entries, err := snapshotEntries(seq, channel, state)
	if err == nil {
		_, err = h.appendEntries(session, entries)
	}
	if err != nil {
		h.journalFailed(session, err, seq)
	}
}

// appendEntries appends entries to a session's journal in batches the
// journal takes, and returns the sequence of the first.
func (h *Host) appendEntries(session string, entries [][]byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(h.ctx, appendTimeout)
	defer cancel()
	var first uint64
	for i := 0; i < len(entries); {
		n := min(len(entries)-i, journal.MaxBatch)
		seqs, err := h.opts.Journal.Append(ctx, session, entries[i:i+n]...)
		if err != nil {
			return 0, err
		}
		if first == 0 && len(seqs) > 0 {
			first = seqs[0]
		}
		i += n
	}
	return first, nil
}

// replayer rebuilds a session's channels from its journal's entries
// through the reducers: a channel's state starts at its snapshot, and the
// actions before a channel's first snapshot are passed over.
type replayer struct {
	session string
	states  map[string]protocol.ChannelState
	first   uint64 // the journal sequence of the first entry read
	last    uint64 // and of the last
	newest  int64  // the highest serverSeq read
}

func newReplayer(session string) *replayer {
	return &replayer{session: session, states: map[string]protocol.ChannelState{}}
}

func (r *replayer) apply(je journalEntry) {
	switch {
	case je.snap != nil && je.snap.Older != nil:
		cs, ok := r.states[je.snap.Channel].(*protocol.ChatState)
		var older []protocol.Turn
		if !ok || json.Unmarshal(je.snap.Older, &older) != nil {
			return
		}
		r.states[je.snap.Channel] = protocol.Apply(cs, &protocol.ChatTurnsLoadedAction{Turns: older, TurnsNextCursor: cs.TurnsNextCursor})
	case je.snap != nil:
		if st, err := decodeState(r.session, je.snap); err == nil {
			r.states[je.snap.Channel] = st
		}
	case je.env != nil:
		if st := r.states[je.env.Channel]; st != nil {
			r.states[je.env.Channel] = protocol.Apply(st, je.env.Action)
		}
	}
}

// result is the session's state and its chats' as replayed, false when
// no snapshot of the session's own channel was met.
func (r *replayer) result() (*protocol.SessionState, []*protocol.ChatState, bool) {
	ss, ok := r.states[r.session].(*protocol.SessionState)
	if !ok {
		return nil, nil, false
	}
	st, chats := withActivity(ss, r.states)
	return st, chats, true
}

// withActivity returns a session's state with its activity worked out
// from its chats' states, and those chats. A session's activity is no
// action's: it follows its chats, as the live state's does (summary.go).
func withActivity(ss *protocol.SessionState, states map[string]protocol.ChannelState) (*protocol.SessionState, []*protocol.ChatState) {
	var chats []*protocol.ChatState
	for _, entry := range ss.Chats {
		if cs, ok := states[entry.Resource].(*protocol.ChatState); ok {
			chats = append(chats, cs)
		}
	}
	deflt := ""
	if ss.DefaultChat != nil {
		deflt = *ss.DefaultChat
	}
	st := *ss
	st.Status, _ = protocol.SessionActivity(ss.Status, ss.Activity, deflt, chats)
	return &st, chats
}

// replay feeds r the session's entries after the journal sequence after,
// up to the action numbered atSeq (any, when atSeq < 0), reading at most
// limit entries. It reports whether it read to the end.
func (h *Host) replay(ctx context.Context, r *replayer, after uint64, atSeq int64, limit int) (bool, error) {
	for scanned := 0; scanned < limit; {
		entries, err := h.opts.Journal.Read(ctx, r.session, after, journal.MaxReadLimit)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			after, r.last = e.Seq, e.Seq
			if r.first == 0 {
				r.first = e.Seq
			}
			je, err := decodeEntry(e.Data)
			if err != nil {
				continue // an entry this version cannot read
			}
			if atSeq >= 0 && je.seq > atSeq {
				return true, nil
			}
			r.newest = max(r.newest, je.seq)
			r.apply(je)
		}
		scanned += len(entries)
		if len(entries) < journal.MaxReadLimit {
			return true, nil
		}
	}
	return false, nil
}

// replayState rebuilds a session's state (the session's channel and its
// chats') as it was right after the action numbered atSeq, from the
// journal: the last snapshot of each channel before it and the actions
// after, starting at the session's restart point when it is before atSeq.
// It reports false when the journal holds no snapshot of the session's own
// channel by then.
func (h *Host) replayState(ctx context.Context, session string, atSeq int64) (*protocol.SessionState, []*protocol.ChatState, bool, error) {
	var after uint64
	if m, ok := h.restartPoint(ctx, session); ok && m.ServerSeq <= atSeq {
		after = m.Seq - 1
	}
	r := newReplayer(session)
	if _, err := h.replay(ctx, r, after, atSeq, maxTimelineScan); err != nil {
		return nil, nil, false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
	}
	ss, chats, ok := r.result()
	return ss, chats, ok, nil
}

// decodeState decodes a snapshot: the session's state or a chat's.
func decodeState(session string, sn *snapshotEntry) (protocol.ChannelState, error) {
	if sn.Channel == session {
		var ss protocol.SessionState
		err := json.Unmarshal(sn.State, &ss)
		return &ss, err
	}
	var cs protocol.ChatState
	err := json.Unmarshal(sn.State, &cs)
	return &cs, err
}
