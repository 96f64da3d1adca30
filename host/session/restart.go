package session

import (
	"bytes"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// RestartMark is the session's journal mark: where its newest restart
// point starts, and the serverSeq its snapshots stand at.
type RestartMark struct {
	Seq       uint64 `json:"seq"`
	ServerSeq int64  `json:"serverSeq"`
}

// When a turn ends, a new restart point is written once the session has
// written this many bytes to its journal since the last one, and at least
// restartRatio times that one's size: the tail a restart reads stays
// short, and the snapshots cost a small share of what a session writes.
const (
	minRestartBytes = 256 << 10
	restartRatio    = 4
)

// restartLog is what a session keeps of its restart points, beside the
// bytes its outbox has written (outbox.written).
type restartLog struct {
	at   int64        // outbox.written when the last one was asked for (guarded by s.mu)
	size atomic.Int64 // the last one's bytes, once written
}

// restartDueLocked reports whether a turn's end should write a new
// restart point.
func (s *Session) restartDueLocked() bool {
	since := s.out.Written() - s.restarts.at
	return since >= max(minRestartBytes, restartRatio*s.restarts.size.Load())
}

// restartPointLocked queues a restart point of the session as it is now,
// with before as the state of channel acting (the state an action about
// to be published was applied to), behind the changes made so far.
func (s *Session) restartPointLocked(acting string, before protocol.ChannelState) {
	s.queueRestartPointLocked(acting, before, nil)
}

// RestartSnap is a channel's state as a restart point writes it. A chat's
// finished turns are written only when no snapshot holds them as they are
// (turntrack.go): then bare says so, and turnsAt where they are.
type RestartSnap struct {
	Channel string
	State   protocol.ChannelState
	e       *ChatEntry // nil for the session's own
	gen     uint64     // e.turnsGen when the state was taken
	Bare    bool
	TurnsAt uint64
}

// queueRestartPointLocked is restartPointLocked, calling then, if set,
// with s.mu held, once the restart point is written: with where each
// chat's turns are in the journal now.
func (s *Session) queueRestartPointLocked(acting string, before protocol.ChannelState, then func(turnsAt map[*ChatEntry]uint64)) {
	if !s.h.Journaled || s.disposed {
		return
	}
	var ss protocol.ChannelState = s.state
	if acting == s.uri && before != nil {
		ss = before
	}
	snaps := []RestartSnap{{Channel: s.uri, State: ss}}
	for _, uri := range s.order {
		e := s.chats[uri]
		if e == nil {
			continue
		}
		sn := RestartSnap{Channel: uri, State: e.chat.State(), e: e, gen: e.turnsGen, TurnsAt: e.rec.TurnsAt}
		if acting == uri && before != nil {
			sn.State = before
		}
		// Forgotten turns are where the record says, or the backend's; a
		// chat's turns as some snapshot holds them need not be copied.
		sn.Bare = !e.loaded || sn.TurnsAt != 0
		snaps = append(snaps, sn)
		e.snapDue = false
	}
	s.snapDue = false
	s.restarts.at = s.out.Written()
	s.out.Later(func() { s.h.WriteRestartPoint(s, snaps, then) })
}

// RestartPointWritten notes, under the session's lock, where a restart
// point just written put each chat's turns (seqs numbering its entries,
// index[i] being snaps[i]'s state entry), calls then with where they are,
// and writes the record again when turns are somewhere new.
func (s *Session) RestartPointWritten(snaps []RestartSnap, index []int, seqs []uint64, then func(map[*ChatEntry]uint64)) {
	s.mu.Lock()
	defer s.unlock()
	turnsAt := map[*ChatEntry]uint64{}
	news := false
	for i, sn := range snaps {
		if sn.e == nil {
			continue
		}
		at := sn.TurnsAt
		if !sn.Bare {
			at = seqs[index[i]]
			news = sn.e.turnsWrittenLocked(sn.gen, at) || news
		}
		turnsAt[sn.e] = at
	}
	if then != nil {
		then(turnsAt)
	}
	if news {
		// A start after a clean stop reads no journal: the record says
		// where the turns are.
		s.persistLocked()
	}
}

// Recovered is a session's state as its journal's tail has it.
type Recovered struct {
	Session *protocol.SessionState
	Chats   map[string]*protocol.ChatState
	Mark    RestartMark
	Stale   bool  // the record was behind the journal (into)
	Newest  int64 // the highest serverSeq in the tail
	// Where each chat's turns are in the journal, and which chats' states
	// lack them (replayer).
	TurnsAt map[string]uint64
	Bare    map[string]bool
}

// chat returns a chat's state as recovered, nil when rc is nil or has none.
func (rc *Recovered) chat(uri string) *protocol.ChatState {
	if rc == nil {
		return nil
	}
	return rc.Chats[uri]
}

// RestartPointIfWritten queues a restart point of the session when it has
// written to its journal since its last one; its outbox writes it once
// the lock goes.
func (s *Session) RestartPointIfWritten() {
	s.mu.Lock()
	defer s.unlock()
	if s.out.Written() > s.restarts.at {
		s.restartPointLocked("", nil)
	}
}

// OutboxEmptied is what closes once the session's outbox has handed
// everything on, nil when it has already. It lets the lock go without
// handing on what is queued: that is the outbox's own work, which
// awaitOutboxes waits for only so long.
func (s *Session) OutboxEmptied() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.EmptyLocked()
}

// into brings a record up to date with the session as its journal's tail
// has it: what clients were told of its title, marks, lifecycle and
// config, and of its chats'. Which chats the session has is the record's
// own: it is stored before any client hears of a chat.
func (rc *Recovered) into(rec *Record) {
	before, _ := EncodeRecord(rec)
	defer func() {
		after, _ := EncodeRecord(rec)
		rc.Stale = !bytes.Equal(before, after)
	}()
	ss := rc.Session
	rec.Title = ss.Title
	rec.Read = ss.Status&protocol.StatusIsRead != 0
	rec.Archived = ss.Status&protocol.StatusIsArchived != 0
	rec.Lifecycle = string(ss.Lifecycle)
	if ss.Lifecycle == protocol.SessionLifecycleFailed && ss.CreationError != nil {
		rec.CreationError = ss.CreationError.Message
	}
	if ss.Config != nil {
		rec.Config = ss.Config.Values
	}
	for _, cr := range rec.Chats {
		cs := rc.Chats[cr.URI]
		if cs == nil {
			continue
		}
		cr.Title = cs.Title
		cr.TurnsAt = rc.TurnsAt[cr.URI]
		cr.Steering, cr.Queued, cr.Draft = cs.SteeringMessage, cs.QueuedMessages, cs.Draft
		cr.Read = cs.Status&protocol.StatusIsRead != 0
		cr.Archived = cs.Status&protocol.StatusIsArchived != 0
		cr.ModifiedAt = max(cr.ModifiedAt, cs.ModifiedAt)
		rec.ModifiedAt = max(rec.ModifiedAt, cs.ModifiedAt)
	}
}

// hostStopped is the error type of a turn a stop of the host cut short.
const hostStopped = "hostStopped"

// EndCut is endCutTurns for one session, under its lock: each chat's turn
// left running ends, and the record is written when a turn ended or it was
// stale.
func (s *Session) EndCut(stale bool) {
	s.mu.Lock()
	defer s.unlock()
	cut := false
	for _, uri := range s.order {
		e := s.chats[uri]
		at := e.chat.State().ActiveTurn
		if at == nil {
			continue
		}
		var took int64
		if start, err := time.Parse(time.RFC3339Nano, at.StartedAt); err == nil {
			took = s.h.Now().Sub(start).Milliseconds()
		}
		s.emitChatLocked(e.chat, &protocol.ChatErrorAction{
			TurnID: at.ID, Duration: max(0, took),
			Part: protocol.ErrorResponsePart{Error: protocol.ErrorInfo{
				ErrorType: hostStopped,
				Message:   "ahpd stopped while this turn ran; it ends with what it had done",
			}},
		}, nil)
		e.keepCutLocked()
		cut = true
	}
	if cut || stale {
		s.persistLocked() // the record catches up with the journal
	}
}

// maxCutTurns bounds the cut turns a chat's record keeps.
const maxCutTurns = 20

// keepCutLocked records in the chat's record the turn a stop of the host
// cut short, now ended: its last turn.
func (e *ChatEntry) keepCutLocked() {
	turns := e.chat.State().Turns
	if len(turns) == 0 {
		return
	}
	e.rec.Cut = append(e.rec.Cut, turns[len(turns)-1])
	if n := len(e.rec.Cut); n > maxCutTurns {
		e.rec.Cut = slices.Clone(e.rec.Cut[n-maxCutTurns:])
	}
}

// withCut puts the turns a stop cut short back among turns read from the
// backend, by when they started, unless the backend kept them. Called with
// s.mu held.
func (e *ChatEntry) withCut(turns []protocol.Turn) []protocol.Turn {
	for _, cut := range e.rec.Cut {
		if slices.ContainsFunc(turns, func(t protocol.Turn) bool { return t.ID == cut.ID }) {
			continue
		}
		at := startOf(cut)
		i := len(turns)
		for i > 0 && startOf(turns[i-1]).After(at) {
			i--
		}
		turns = slices.Insert(turns, i, cut)
	}
	return turns
}

// startOf is when a finished turn started, the zero time when unknown.
func startOf(t protocol.Turn) time.Time {
	if t.StartedAt == nil {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, *t.StartedAt)
	return at
}

// LeftQueued lists, in order, the session's chats with messages queued
// and no turn running: those sendLeftQueued starts a turn in.
func (s *Session) LeftQueued() []*ChatEntry {
	s.mu.Lock()
	defer s.unlock()
	var waiting []*ChatEntry
	for _, uri := range s.order {
		e := s.chats[uri]
		if cs := e.chat.State(); len(cs.QueuedMessages) > 0 && cs.ActiveTurn == nil {
			waiting = append(waiting, e)
		}
	}
	return waiting
}

// TakeQueued has a chat of the session start its first queued message, as
// it would once a turn ended, under the session's lock as any of its
// changes are.
func (s *Session) TakeQueued(e *ChatEntry) {
	s.mu.Lock()
	e.chat.TakeQueued()
	s.unlock()
}
