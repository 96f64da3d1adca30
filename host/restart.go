package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Restart points: how a host that starts again, even after kill -9,
// rebuilds each session from its record and its journal's tail.
//
// The record is written after a change is told, so a crash can leave it
// behind what clients saw; the journal never is, since every action is
// written to it before it is sent. A restart point is a place in a
// session's journal from which the reducers rebuild the whole session:
// snapshots of the session's channel and of every one of its chats, in a
// row, with the session's journal mark (journal.SetMark) naming the
// first. The host writes one at the session's first action after it was
// built (from its record, or a moved chat's new home), when it falls
// asleep, at a turn's end once enough has been written since the last
// one, and at shutdown when anything has. A restart reads from the mark
// to the journal's end (restart.go, recoverSession): the tail is never
// much more than a restart point's size, whatever the session's age.

// restartMark is the session's journal mark: where its newest restart
// point starts, and the serverSeq its snapshots stand at.
type restartMark struct {
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
func (s *session) restartDueLocked() bool {
	since := s.out.Written() - s.restarts.at
	return since >= max(minRestartBytes, restartRatio*s.restarts.size.Load())
}

// restartPointLocked queues a restart point of the session as it is now,
// with before as the state of channel acting (the state an action about
// to be published was applied to), behind the changes made so far.
func (s *session) restartPointLocked(acting string, before protocol.ChannelState) {
	s.queueRestartPointLocked(acting, before, nil)
}

// restartSnap is a channel's state as a restart point writes it. A chat's
// finished turns are written only when no snapshot holds them as they are
// (turntrack.go): then bare says so, and turnsAt where they are.
type restartSnap struct {
	channel string
	state   protocol.ChannelState
	e       *chatEntry // nil for the session's own
	gen     uint64     // e.turnsGen when the state was taken
	bare    bool
	turnsAt uint64
}

// queueRestartPointLocked is restartPointLocked, calling then, if set,
// with s.mu held, once the restart point is written: with where each
// chat's turns are in the journal now.
func (s *session) queueRestartPointLocked(acting string, before protocol.ChannelState, then func(turnsAt map[*chatEntry]uint64)) {
	if s.h.opts.Journal == nil || s.disposed {
		return
	}
	var ss protocol.ChannelState = s.state
	if acting == s.uri && before != nil {
		ss = before
	}
	snaps := []restartSnap{{channel: s.uri, state: ss}}
	for _, uri := range s.order {
		e := s.chats[uri]
		if e == nil {
			continue
		}
		sn := restartSnap{channel: uri, state: e.chat.State(), e: e, gen: e.turnsGen, turnsAt: e.rec.TurnsAt}
		if acting == uri && before != nil {
			sn.state = before
		}
		// Forgotten turns are where the record says, or the backend's; a
		// chat's turns as some snapshot holds them need not be copied.
		sn.bare = !e.loaded || sn.turnsAt != 0
		snaps = append(snaps, sn)
		e.snapDue = false
	}
	s.snapDue = false
	s.restarts.at = s.out.Written()
	s.out.Later(func() { s.h.writeRestartPoint(s, snaps, then) })
}

// writeRestartPoint encodes and appends a restart point's entries, marks
// them, and notes where each chat's turns are now. A mark that cannot be
// set leaves the last one, which is still a place a restart can rebuild
// the session from, with a longer tail.
func (h *Host) writeRestartPoint(s *session, snaps []restartSnap, then func(map[*chatEntry]uint64)) {
	seq := h.bus.Current() // every action of the session before it is numbered, none after
	var entries [][]byte
	index := make([]int, len(snaps)) // where each snap's state entry is
	for i, sn := range snaps {
		index[i] = len(entries)
		var err error
		if cs, ok := sn.state.(*protocol.ChatState); ok && sn.bare {
			var entry []byte
			entry, err = bareEntry(seq, sn.channel, cs, sn.turnsAt)
			entries = append(entries, entry)
		} else {
			var more [][]byte
			more, err = snapshotEntries(seq, sn.channel, sn.state)
			entries = append(entries, more...)
		}
		if err != nil {
			h.log.Error("could not encode a restart point", "session", s.uri, "channel", sn.channel, "err", err)
			return
		}
	}
	seqs, err := h.appendDurably(s.uri, entries)
	if err != nil {
		return // the host stops
	}
	first := seqs[0]
	mark, err := json.Marshal(restartMark{Seq: first, ServerSeq: seq})
	if err == nil {
		ctx, cancel := context.WithTimeout(h.ctx, markTimeout)
		err = h.opts.Journal.SetMark(ctx, s.uri, mark)
		cancel()
	}
	if err != nil {
		h.log.Warn("could not mark a session's restart point; a restart reads its journal from the one before", "session", s.uri, "err", err)
	} else {
		size := 0
		for _, e := range entries {
			size += len(e)
		}
		s.restarts.size.Store(int64(size))
		h.marks.note(s.uri, seq, first)
	}
	s.restartPointWritten(snaps, index, seqs, then)
}

// restartPointWritten notes, under the session's lock, where a restart
// point just written put each chat's turns (seqs numbering its entries,
// index[i] being snaps[i]'s state entry), calls then with where they are,
// and writes the record again when turns are somewhere new.
func (s *session) restartPointWritten(snaps []restartSnap, index []int, seqs []uint64, then func(map[*chatEntry]uint64)) {
	s.mu.Lock()
	defer s.unlock()
	turnsAt := map[*chatEntry]uint64{}
	news := false
	for i, sn := range snaps {
		if sn.e == nil {
			continue
		}
		at := sn.turnsAt
		if !sn.bare {
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

// markTimeout bounds setting a mark in the journal.
const markTimeout = 5 * time.Second

// restartPoint reads the session's journal mark.
func (h *Host) restartPoint(ctx context.Context, session string) (restartMark, bool) {
	data, ok, err := h.opts.Journal.Mark(ctx, session)
	var m restartMark
	if err != nil || !ok || json.Unmarshal(data, &m) != nil || m.Seq == 0 {
		return restartMark{}, false
	}
	return m, true
}

// maxRecoverEntries bounds the tail a restart reads of one session; a
// session with more (restart points failing to be written) comes back as
// its record has it.
const maxRecoverEntries = 1_000_000

// recovered is a session's state as its journal's tail has it.
type recovered struct {
	session *protocol.SessionState
	chats   map[string]*protocol.ChatState
	mark    restartMark
	stale   bool  // the record was behind the journal (into)
	newest  int64 // the highest serverSeq in the tail
	// Where each chat's turns are in the journal, and which chats' states
	// lack them (replayer).
	turnsAt map[string]uint64
	bare    map[string]bool
}

// chat returns a chat's state as recovered, nil when rc is nil or has none.
func (rc *recovered) chat(uri string) *protocol.ChatState {
	if rc == nil {
		return nil
	}
	return rc.chats[uri]
}

// recoverSession rebuilds a stored session's state from its journal: from
// its restart point to the end. It returns nil when the journal cannot
// (no restart point, or retention took it).
func (h *Host) recoverSession(ctx context.Context, uri string) (*recovered, error) {
	m, ok := h.restartPoint(ctx, uri)
	if !ok {
		return nil, nil
	}
	r := newReplayer(uri)
	r.resolve = h.turnsResolver(ctx, uri)
	done, err := h.replay(ctx, r, m.Seq-1, -1, maxRecoverEntries)
	if err != nil {
		return nil, err
	}
	if !done {
		return nil, errors.New("the journal's tail is too long to read back")
	}
	for ch, bare := range r.bare {
		// A turn the stop cut ends as it comes back, among its chat's
		// turns: those are read now.
		if cs, ok := r.states[ch].(*protocol.ChatState); ok && bare && cs.ActiveTurn != nil {
			r.fill(ch)
		}
	}
	if r.unresolved > 0 {
		h.log.Warn("the journal no longer holds some of a session's turns; they are read from its backend", "session", uri, "chats", r.unresolved)
	}
	ss, chats, ok := r.result()
	if !ok || r.first != m.Seq {
		return nil, nil // no snapshot, or retention took the restart point's
	}
	rc := &recovered{session: ss, chats: map[string]*protocol.ChatState{}, mark: m, newest: r.newest, turnsAt: r.turnsAt, bare: r.bare}
	for _, cs := range chats {
		rc.chats[cs.Resource] = cs
	}
	return rc, nil
}

// writeRestartPoints writes a restart point of every session that wrote
// to its journal since its last one, as the host shuts down: the next
// start reads a short tail.
func (h *Host) writeRestartPoints(sessions []*session) {
	if h.opts.Journal == nil {
		return
	}
	for _, s := range sessions {
		s.restartPointIfWritten()
	}
}

// restartPointIfWritten queues a restart point of the session when it has
// written to its journal since its last one; its outbox writes it once
// the lock goes.
func (s *session) restartPointIfWritten() {
	s.mu.Lock()
	defer s.unlock()
	if s.out.Written() > s.restarts.at {
		s.restartPointLocked("", nil)
	}
}

// awaitOutboxes waits, up to d, for the sessions' outboxes to have handed
// everything on: at shutdown, the restart points and records just queued
// are written before the host's context ends.
func awaitOutboxes(sessions []*session, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, s := range sessions {
		empty := s.outboxEmptied()
		if empty == nil {
			continue
		}
		select {
		case <-empty:
		case <-t.C:
			return
		}
	}
}

// outboxEmptied is what closes once the session's outbox has handed
// everything on, nil when it has already. It lets the lock go without
// handing on what is queued: that is the outbox's own work, which
// awaitOutboxes waits for only so long.
func (s *session) outboxEmptied() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.EmptyLocked()
}

// into brings a record up to date with the session as its journal's tail
// has it: what clients were told of its title, marks, lifecycle and
// config, and of its chats'. Which chats the session has is the record's
// own: it is stored before any client hears of a chat.
func (rc *recovered) into(rec *record) {
	before, _ := encodeRecord(rec)
	defer func() {
		after, _ := encodeRecord(rec)
		rc.stale = !bytes.Equal(before, after)
	}()
	ss := rc.session
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
		cs := rc.chats[cr.URI]
		if cs == nil {
			continue
		}
		cr.Title = cs.Title
		cr.TurnsAt = rc.turnsAt[cr.URI]
		cr.Steering, cr.Queued, cr.Draft = cs.SteeringMessage, cs.QueuedMessages, cs.Draft
		cr.Read = cs.Status&protocol.StatusIsRead != 0
		cr.Archived = cs.Status&protocol.StatusIsArchived != 0
		cr.ModifiedAt = max(cr.ModifiedAt, cs.ModifiedAt)
		rec.ModifiedAt = max(rec.ModifiedAt, cs.ModifiedAt)
	}
}

// recoverAll reads the journal's tail of every stored session, a few at a
// time, and returns what it holds by session URI. A session whose tail
// cannot be read comes back as its record has it.
func (h *Host) recoverAll(recs []*record) map[string]*recovered {
	out := make(map[string]*recovered, len(recs))
	if h.opts.Journal == nil {
		return out
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan *record)
	)
	for range recoverWorkers {
		wg.Go(func() {
			for rec := range next {
				rc, err := h.recoverSession(h.ctx, rec.URI)
				if err != nil {
					h.log.Warn("could not read a session's journal back; it comes back as its record has it", "session", rec.URI, "err", err)
				}
				if rc != nil {
					mu.Lock()
					out[rec.URI] = rc
					mu.Unlock()
				}
			}
		})
	}
	for _, rec := range recs {
		if !rec.External {
			next <- rec
		}
	}
	close(next)
	wg.Wait()
	return out
}

// hostStopped is the error type of a turn a stop of the host cut short.
const hostStopped = "hostStopped"

// recoverWorkers is how many sessions' tails are read at once.
const recoverWorkers = 32

// endCutTurns ends, with an error saying why, every turn the journal's
// tail left running: the host stopped under it, and its agent is gone.
// The clients that saw it start see it end, as any turn does. The records
// behind their journal (stale) are written again.
func (h *Host) endCutTurns(sessions []*session, stale map[*session]bool) {
	for _, s := range sessions {
		s.endCut(stale[s])
	}
}

// endCut is endCutTurns for one session, under its lock: each chat's turn
// left running ends, and the record is written when a turn ended or it was
// stale.
func (s *session) endCut(stale bool) {
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
			took = s.h.now().Sub(start).Milliseconds()
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
func (e *chatEntry) keepCutLocked() {
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
func (e *chatEntry) withCut(turns []protocol.Turn) []protocol.Turn {
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

// A host that stopped cleanly wrote every record and every restart point
// before it let the journal go, and says so with a mark of its own in
// the journal (cleanKey): the next start then reads no session's tail,
// which after a crash costs it about a millisecond a session. The mark
// names the newest serverSeq it wrote; a start takes it as clean only if
// the journal holds nothing newer, and takes it away before anything
// else is written.

// cleanKey is the name the host's clean stop is marked under.
const cleanKey = "ahpd-host://stopped-cleanly"

type cleanMark struct {
	ServerSeq int64 `json:"serverSeq"`
}

// stoppedCleanly reports whether the last host on this journal stopped
// cleanly with nothing written after, newest being the journal's newest
// serverSeq, and marks this run as not yet stopped.
func (h *Host) stoppedCleanly(newest int64) bool {
	j := h.opts.Journal
	if j == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(h.ctx, markTimeout)
	defer cancel()
	data, ok, err := j.Mark(ctx, cleanKey)
	var m cleanMark
	clean := err == nil && ok && json.Unmarshal(data, &m) == nil && m.ServerSeq > 0 && newest <= m.ServerSeq
	if clean {
		if err := j.SetMark(ctx, cleanKey, []byte(`{}`)); err != nil {
			h.log.Warn("could not mark the journal as in use; reading every session's tail", "err", err)
			return false
		}
	}
	return clean
}

// markStoppedCleanly marks the journal as left by a clean stop, once
// every record is written: unless a record could not be, when the next
// start must read the journal to catch it up.
func (h *Host) markStoppedCleanly() {
	j := h.opts.Journal
	if j == nil || h.storeErrors.Load() > 0 || h.health.lost.Load() {
		return
	}
	data, err := json.Marshal(cleanMark{ServerSeq: h.bus.Current()})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := j.SetMark(ctx, cleanKey, data); err != nil {
		h.log.Warn("could not mark the journal as left by a clean stop; the next start reads every session's tail", "err", err)
	}
}

// sendLeftQueued starts, in each chat that came back from a stop with
// messages queued and no turn running, its first queued message, as the
// chat would have once its turn ended: a message queued before the stop
// is not left waiting for a turn nobody starts.
func (h *Host) sendLeftQueued() {
	for _, s := range h.sessionList() {
		waiting := s.leftQueued()
		for _, e := range waiting {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				s.pin(true)
				defer s.unpin()
				s.loadTurns(h.ctx, e) // the turn builds on them
				s.takeQueued(e)
			}()
		}
	}
}

// leftQueued lists, in order, the session's chats with messages queued
// and no turn running: those sendLeftQueued starts a turn in.
func (s *session) leftQueued() []*chatEntry {
	s.mu.Lock()
	defer s.unlock()
	var waiting []*chatEntry
	for _, uri := range s.order {
		e := s.chats[uri]
		if cs := e.chat.State(); len(cs.QueuedMessages) > 0 && cs.ActiveTurn == nil {
			waiting = append(waiting, e)
		}
	}
	return waiting
}

// takeQueued has a chat of the session start its first queued message, as
// it would once a turn ended, under the session's lock as any of its
// changes are.
func (s *session) takeQueued(e *chatEntry) {
	s.mu.Lock()
	e.chat.TakeQueued()
	s.unlock()
}
