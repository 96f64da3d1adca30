package host

import (
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
// the actions after. ahpd/replaySession answers that state.

// journalEntry is an entry of a session's journal: an action envelope, a
// snapshot of one of its channels, or the session waking or falling
// asleep, each placed after the action numbered seq.
type journalEntry struct {
	env       *protocol.ActionEnvelope
	snap      *snapshotEntry
	residency string // "wake" or "sleep"
	seq       int64
}

func decodeEntry(data []byte) (journalEntry, error) {
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

type snapshotEntry struct {
	Channel string          `json:"channel"`
	State   json.RawMessage `json:"state"`
}

// snapshotLocked queues writing a channel's state to the session's
// journal, before the action that follows it in the outbox.
func (s *session) snapshotLocked(channel string, state protocol.ChannelState) {
	s.out.later(func() { s.h.writeSnapshot(s.uri, channel, state) })
}

func (h *Host) writeSnapshot(session, channel string, state protocol.ChannelState) {
	data, err := json.Marshal(state)
	if err != nil {
		return
	}
	seq := h.bus.Current() // every action of the session before it is numbered, none after
	entry, err := json.Marshal(map[string]any{"serverSeq": seq, "snapshot": snapshotEntry{Channel: channel, State: data}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, appendTimeout)
	defer cancel()
	if _, err := h.opts.Journal.Append(ctx, session, entry); err != nil {
		h.journalFailed(session, err, seq)
	}
}

// replayState rebuilds a session's state (the session's channel and its
// chats') as it was right after the action numbered atSeq, from the
// journal: the last snapshot of each channel before it and the actions
// after. It reports false when the journal holds no snapshot of the
// session's own channel by then.
func (h *Host) replayState(ctx context.Context, session string, atSeq int64) (*protocol.SessionState, []*protocol.ChatState, bool, error) {
	states := map[string]protocol.ChannelState{}
	var after uint64
	for scanned := 0; scanned < maxTimelineScan; {
		entries, err := h.opts.Journal.Read(ctx, session, after, journal.MaxReadLimit)
		if err != nil {
			return nil, nil, false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
		}
		for _, e := range entries {
			after = e.Seq
			je, err := decodeEntry(e.Data)
			if err != nil {
				continue // an entry this version cannot read
			}
			if je.seq > atSeq {
				scanned = maxTimelineScan
				break
			}
			switch {
			case je.snap != nil:
				if st, err := decodeState(session, je.snap); err == nil {
					states[je.snap.Channel] = st
				}
			case je.env != nil:
				if st := states[je.env.Channel]; st != nil {
					states[je.env.Channel] = protocol.Apply(st, je.env.Action)
				}
			}
		}
		scanned += len(entries)
		if len(entries) < journal.MaxReadLimit {
			break
		}
	}
	ss, ok := states[session].(*protocol.SessionState)
	if !ok {
		return nil, nil, false, nil
	}
	var chats []*protocol.ChatState
	for _, entry := range ss.Chats {
		if cs, ok := states[entry.Resource].(*protocol.ChatState); ok {
			chats = append(chats, cs)
		}
	}
	// A session's activity is no action's: it follows its chats, as the
	// live state's does (summary.go).
	deflt := ""
	if ss.DefaultChat != nil {
		deflt = *ss.DefaultChat
	}
	st := *ss
	st.Status, _ = protocol.SessionActivity(ss.Status, ss.Activity, deflt, chats)
	return &st, chats, true, nil
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
