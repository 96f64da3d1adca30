package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/ahpd/ahpd/host/session"
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

// writeRestartPoint encodes and appends a restart point's entries, marks
// them, and notes where each chat's turns are now. A mark that cannot be
// set leaves the last one, which is still a place a restart can rebuild
// the session from, with a longer tail.
func (h *Host) writeRestartPoint(s *session.Session, snaps []session.RestartSnap, then func(map[*session.ChatEntry]uint64)) {
	seq := h.bus.Current() // every action of the session before it is numbered, none after
	var entries [][]byte
	index := make([]int, len(snaps)) // where each snap's state entry is
	for i, sn := range snaps {
		index[i] = len(entries)
		var err error
		if cs, ok := sn.State.(*protocol.ChatState); ok && sn.Bare {
			var entry []byte
			entry, err = bareEntry(seq, sn.Channel, cs, sn.TurnsAt)
			entries = append(entries, entry)
		} else {
			var more [][]byte
			more, err = session.SnapshotEntries(seq, sn.Channel, sn.State)
			entries = append(entries, more...)
		}
		if err != nil {
			h.log.Error("could not encode a restart point", "session", s.URI(), "channel", sn.Channel, "err", err)
			return
		}
	}
	seqs, err := h.appendDurably(s.URI(), entries)
	if err != nil {
		return // the host stops
	}
	first := seqs[0]
	mark, err := json.Marshal(session.RestartMark{Seq: first, ServerSeq: seq})
	if err == nil {
		ctx, cancel := context.WithTimeout(h.ctx, markTimeout)
		err = h.opts.Journal.SetMark(ctx, s.URI(), mark)
		cancel()
	}
	if err != nil {
		h.log.Warn("could not mark a session's restart point; a restart reads its journal from the one before", "session", s.URI(), "err", err)
	} else {
		size := 0
		for _, e := range entries {
			size += len(e)
		}
		s.NoteRestartPointSize(int64(size))
		h.marks.note(s.URI(), seq, first)
	}
	s.RestartPointWritten(snaps, index, seqs, then)
}

// markTimeout bounds setting a mark in the journal.
const markTimeout = 5 * time.Second

// markLeast is the least the mark is given at the end of a shutdown past
// its grace.
const markLeast = 500 * time.Millisecond

// restartPoint reads the session's journal mark.
func (h *Host) restartPoint(ctx context.Context, uri string) (session.RestartMark, bool) {
	data, ok, err := h.opts.Journal.Mark(ctx, uri)
	var m session.RestartMark
	if err != nil || !ok || json.Unmarshal(data, &m) != nil || m.Seq == 0 {
		return session.RestartMark{}, false
	}
	return m, true
}

// maxRecoverEntries bounds the tail a restart reads of one session; a
// session with more (restart points failing to be written) comes back as
// its record has it.
const maxRecoverEntries = 1_000_000

// recoverSession rebuilds a stored session's state from its journal: from
// its restart point to the end. It returns nil when the journal cannot
// (no restart point, or retention took it).
func (h *Host) recoverSession(ctx context.Context, uri string) (*session.Recovered, error) {
	m, ok := h.restartPoint(ctx, uri)
	if !ok {
		return nil, nil
	}
	r := newReplayer(uri)
	r.resolve = h.turnsResolver(ctx, uri)
	r.taken = h.takenInJournal
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
	rc := &session.Recovered{Session: ss, Chats: map[string]*protocol.ChatState{}, Mark: m, Newest: r.newest, TurnsAt: r.turnsAt, Bare: r.bare}
	for _, cs := range chats {
		rc.Chats[cs.Resource] = cs
	}
	return rc, nil
}

// writeRestartPoints writes a restart point of every session that wrote
// to its journal since its last one, as the host shuts down: the next
// start reads a short tail.
func (h *Host) writeRestartPoints(sessions []*session.Session) {
	if h.opts.Journal == nil {
		return
	}
	for _, s := range sessions {
		s.RestartPointIfWritten()
	}
}

// awaitOutboxes waits, up to d, for the sessions' outboxes to have handed
// everything on: at shutdown, the restart points and records just queued
// are written before the host's context ends.
func awaitOutboxes(sessions []*session.Session, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, s := range sessions {
		empty := s.OutboxEmptied()
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

// recoverAll reads the journal's tail of every stored session, a few at a
// time, and returns what it holds by session URI. A session whose tail
// cannot be read comes back as its record has it.
func (h *Host) recoverAll(recs []*session.Record) map[string]*session.Recovered {
	out := make(map[string]*session.Recovered, len(recs))
	if h.opts.Journal == nil {
		return out
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan *session.Record)
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

// recoverWorkers is how many sessions' tails are read at once.
const recoverWorkers = 32

// endCutTurns ends, with an error saying why, every turn the journal's
// tail left running: the host stopped under it, and its agent is gone.
// The clients that saw it start see it end, as any turn does. The records
// behind their journal (stale) are written again.
func (h *Host) endCutTurns(sessions []*session.Session, stale map[*session.Session]bool) {
	for _, s := range sessions {
		s.EndCut(stale[s])
	}
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
func (h *Host) markStoppedCleanly(closing context.Context) {
	j := h.opts.Journal
	if j == nil || h.storeErrors.Load() > 0 || h.health.lost.Load() {
		return
	}
	data, err := json.Marshal(cleanMark{ServerSeq: h.bus.Current()})
	if err != nil {
		return
	}
	// Past the shutdown's grace, the mark gets what is left of stopWindow
	// after it, and markLeast at least: a journal that cannot take it (the
	// last NATS node of a cluster, with no quorum) does not hold the stop
	// up for markTimeout.
	wait := markTimeout
	if dl, ok := closing.Deadline(); ok {
		wait = min(wait, max(time.Until(dl)+stopWindow, markLeast))
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
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
		waiting := s.LeftQueued()
		for _, e := range waiting {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				s.Pin(true)
				defer s.Unpin()
				s.LoadTurns(h.ctx, e) // the turn builds on them
				s.TakeQueued(e)
			}()
		}
	}
}
