package host

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/maphash"

	"github.com/ahpd/ahpd/host/session"
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
	snap      *session.SnapshotEntry
	residency string // "wake" or "sleep"
	seq       int64
	at        uint64 // its journal sequence, when the reader sets it
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
		ServerSeq int64                  `json:"serverSeq"`
		Snapshot  *session.SnapshotEntry `json:"snapshot"`
		Residency string                 `json:"residency"`
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

// dupes passes over the entries a retried append wrote twice
// (appendDurably): an entry whose ack was lost is written again, so a copy
// of it may follow it, within a batch or two. Copies are the same bytes,
// and no two entries the host writes are (an action's serverSeq is its
// own; two equal snapshots say the same), so an entry equal to one of the
// last few read is a copy.
type dupes struct {
	seed maphash.Seed
	ring [2 * journal.MaxBatch]uint64
	n    int // entries noted, the next slot of ring at n % len(ring)
	set  map[uint64]int
}

// seen reports whether data is a copy of an entry noted recently, and
// notes it.
func (d *dupes) seen(data []byte) bool {
	if d.set == nil {
		d.seed = maphash.MakeSeed()
		d.set = make(map[uint64]int, len(d.ring))
	}
	h := maphash.Bytes(d.seed, data)
	if d.set[h] > 0 {
		return true
	}
	slot := d.n % len(d.ring)
	if d.n >= len(d.ring) {
		old := d.ring[slot]
		if d.set[old]--; d.set[old] <= 0 {
			delete(d.set, old)
		}
	}
	d.ring[slot] = h
	d.set[h]++
	d.n++
	return false
}

// writeResidency records in a session's journal that it woke or fell
// asleep, for its timeline. It runs as its session's outbox hands on.
func (h *Host) writeResidency(session, what string) {
	entry, err := json.Marshal(map[string]any{"serverSeq": h.bus.Current(), "residency": what})
	if err != nil {
		return
	}
	_, _ = h.appendDurably(session, [][]byte{entry})
}

// bareEntry encodes a chat's state as a snapshot at serverSeq seq without
// its finished turns, which are as in the snapshot at journal sequence at
// (0: the backend's alone).
func bareEntry(seq int64, channel string, cs *protocol.ChatState, at uint64) ([]byte, error) {
	bare := *cs
	bare.Turns, bare.TurnsNextCursor = []protocol.Turn{}, nil
	data, err := json.Marshal(&bare)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"serverSeq": seq, "snapshot": session.SnapshotEntry{Channel: channel, State: data, Bare: true, TurnsAt: at}})
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
	dupes   dupes

	// Where each chat's finished turns are in the journal as replayed:
	// the snapshot holding them, 0 once an action changed them
	// (turntrack.go). A chat bare has a state without them, as its
	// snapshot pointed to them.
	turnsAt map[string]uint64
	bare    map[string]bool
	// resolve, when set, reads the turns a bare chat's snapshot points to,
	// before an action changes them; without it a bare chat stays bare.
	resolve func(at uint64) ([]protocol.Turn, *string, error)
	// unresolved counts bare chats whose turns could not be read.
	unresolved int
	// taken, when set, is told of each client action read (the host marks
	// it taken, rpc_dispatch.go).
	taken func(envs []protocol.ActionEnvelope)
}

func newReplayer(session string) *replayer {
	return &replayer{session: session, states: map[string]protocol.ChannelState{}, turnsAt: map[string]uint64{}, bare: map[string]bool{}}
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
		st, err := decodeState(r.session, je.snap)
		if err != nil {
			return
		}
		r.states[je.snap.Channel] = st
		if _, ok := st.(*protocol.ChatState); ok {
			r.turnsAt[je.snap.Channel], r.bare[je.snap.Channel] = je.at, je.snap.Bare
			if je.snap.Bare {
				r.turnsAt[je.snap.Channel] = je.snap.TurnsAt
			}
		}
	case je.env != nil:
		if r.taken != nil && je.env.Origin != nil {
			r.taken([]protocol.ActionEnvelope{*je.env})
		}
		ch := je.env.Channel
		st := r.states[ch]
		if st == nil {
			return
		}
		next := protocol.Apply(st, je.env.Action)
		if cs, ok := st.(*protocol.ChatState); ok && !session.SameTurns(cs, next.(*protocol.ChatState)) {
			if r.bare[ch] && r.fill(ch) {
				next = protocol.Apply(r.states[ch], je.env.Action)
			}
			r.turnsAt[ch] = 0
		}
		r.states[ch] = next
	}
}

// fill gives a bare chat the turns its snapshot points to, reporting
// whether it could.
func (r *replayer) fill(channel string) bool {
	if r.resolve == nil || r.turnsAt[channel] == 0 {
		return false
	}
	turns, cursor, err := r.resolve(r.turnsAt[channel])
	if err != nil {
		r.unresolved++
		return false
	}
	cs := *r.states[channel].(*protocol.ChatState)
	cs.Turns, cs.TurnsNextCursor = turns, cursor
	r.states[channel] = &cs
	r.bare[channel] = false
	return true
}

// fillAll gives every bare chat its turns, for a state to be shown whole.
func (r *replayer) fillAll() {
	for ch, bare := range r.bare {
		if bare {
			r.fill(ch)
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
			if r.dupes.seen(e.Data) {
				continue
			}
			je, err := decodeEntry(e.Data)
			if err != nil {
				continue // an entry this version cannot read
			}
			je.at = e.Seq
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
	r.resolve = h.turnsResolver(ctx, session)
	if _, err := h.replay(ctx, r, after, atSeq, maxTimelineScan); err != nil {
		return nil, nil, false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
	}
	r.fillAll()
	ss, chats, ok := r.result()
	return ss, chats, ok, nil
}

// decodeState decodes a snapshot: the session's state or a chat's.
func decodeState(session string, sn *session.SnapshotEntry) (protocol.ChannelState, error) {
	if sn.Channel == session {
		var ss protocol.SessionState
		err := json.Unmarshal(sn.State, &ss)
		return &ss, err
	}
	var cs protocol.ChatState
	err := json.Unmarshal(sn.State, &cs)
	return &cs, err
}
