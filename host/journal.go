package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// The journal (docs/JOURNAL.md): every action a session emits is written
// to the session's journal, under its URI, before any client is sent it,
// so whatever a client saw is there after a crash. The bus numbers a run
// of actions (its serverSeqs), the journal takes them, and the bus then
// sends them, holding back whatever was numbered after them meanwhile;
// the entries are the envelopes as clients get them, serverSeq included.
// Root's actions are written to a journal of root's own.
//
// Nothing goes out that the journal does not hold. An append that fails
// is tried again, for as long as it takes, and the run waits for it: a
// slow journal slows its sessions (their agents and clients wait once
// their outboxes are full, outbox.go), and a journal that fails makes the
// host refuse new work with the reason until an append succeeds again
// (journalRefusal). Only a stopping host gives a run up, unsent.

// Retrying a failed append: the first wait, and the longest.
const (
	retryFirst = 20 * time.Millisecond
	retryMost  = time.Second
)

// journalTrouble is why the journal does not take what the host writes,
// and since when.
type journalTrouble struct {
	since      time.Time
	reason     string
	turnsEnded atomic.Bool // endTurnsForSpace ran for it
}

// journalHealth is whether the host's appends succeed. Its fields are
// atomics: every outbox reads and writes them holding nothing.
type journalHealth struct {
	trouble  atomic.Pointer[journalTrouble] // nil while appends succeed
	lost     atomic.Bool                    // a run was given up unsent as the host stopped
	gap      atomic.Int64                   // the newest serverSeq of a run sent that the journal could not take (unwritable)
	waiting  atomic.Int64                   // agents and clients waiting for their session's journal now
	watching atomic.Bool                    // watchForRoom watches the disk

	// changed is closed, and made again, when trouble comes or goes: what
	// a test waits on.
	changed atomic.Pointer[chan struct{}]

	// giving is the context of every append. Once the host's shutdown is
	// past its grace (Close's ctx, stopTrying) it is cancelled if the
	// journal is in trouble, then or later: an append then ends and is
	// not tried again, so a host whose journal is down still stops, and
	// one whose journal works writes everything down.
	giving   context.Context
	giveUp   context.CancelFunc
	stopping atomic.Bool
	// appending holds when each append waiting for its ack started, by
	// a token of its own: what stopTrying looks at.
	appending sync.Map
}

// stopTrying gives up the appends of a journal in trouble, and of one
// that comes to be: the shutdown's grace has passed. Past it, an append
// waiting stopWindow for its ack, not journalSlow, puts the journal in
// trouble, the ones in flight now included: a journal that does not
// acknowledge (the last NATS node of a cluster, with no quorum, never
// does) does not keep the host waiting journalSlow, and one that works
// takes far less.
func (jh *journalHealth) stopTrying() {
	if jh.stopping.Swap(true) {
		return
	}
	if jh.trouble.Load() != nil {
		jh.giveUp()
		return
	}
	time.AfterFunc(stopWindow, func() {
		if jh.waitedSince(time.Now().Add(-stopWindow)) {
			jh.giveUp()
		}
	})
}

// waitedSince reports whether an append started before t waits still.
func (jh *journalHealth) waitedSince(t time.Time) bool {
	old := false
	jh.appending.Range(func(_, v any) bool {
		old = v.(time.Time).Before(t)
		return !old
	})
	return old
}

// slowAfter is how long an append may wait for its ack before the
// journal counts as failing: journalSlow, and stopWindow past the
// shutdown's grace.
func (jh *journalHealth) slowAfter() time.Duration {
	if jh.stopping.Load() {
		return stopWindow
	}
	return journalSlow
}

// moved tells whoever waits on changed.
func (jh *journalHealth) moved() {
	next := make(chan struct{})
	if old := jh.changed.Swap(&next); old != nil {
		close(*old)
	}
}

// publish sends a run of actions to the bus, written down first when the
// outbox has a journal (a session's, root's) and the host keeps one. It
// returns the bytes written to the journal.
func (h *Host) publish(key string, run []outbox.Effect) int64 {
	if h.opts.Journal == nil || key == "" {
		h.bus.PublishAll(outbox.Items(run))
		return 0
	}
	h.claimFirst(h.health.giving, key)
	bt := h.bus.Reserve(outbox.Items(run))
	size, err := h.writeDown(key, bt.Envelopes())
	switch {
	case errors.Is(err, errStopping):
		// The host is stopping and the journal never took the run: it is
		// not sent, as nothing is that the journal does not hold.
		h.health.lost.Store(true)
		h.bus.Discard(bt)
		return size
	case errors.Is(err, journal.ErrFenced):
		// Another host took the session: nothing this one does with it
		// reaches the journal or any client (fenced.go).
		h.bus.Discard(bt)
		h.fencedOut(key)
		return size
	case err != nil:
		// An entry no journal can take: the run goes out, for its
		// clients' states to follow the session's, and no replay spans it.
		envs := bt.Envelopes()
		h.health.noteGap(envs[len(envs)-1].ServerSeq)
	}
	h.bus.Release(bt)
	return size
}

// writeDown appends envelopes to a session's journal, in order, and
// returns their bytes. It fails only when the host stops first.
func (h *Host) writeDown(session string, envs []protocol.ActionEnvelope) (int64, error) {
	entries := make([][]byte, len(envs))
	var size int64
	for i := range envs {
		// Append reports a value JSON cannot hold but writes valid JSON in
		// its place, as the frame sent does.
		entries[i], _ = protocol.Append(nil, &envs[i])
		size += int64(len(entries[i]))
	}
	seqs, err := h.appendDurably(session, entries)
	for i := 0; i < len(seqs); i += journal.MaxBatch {
		h.marks.note(session, envs[i].ServerSeq, seqs[i])
	}
	return size, err
}

// errStopping is appendDurably's error when the host stops before the
// journal took everything.
var errStopping = errors.New("the host stopped before the journal took the entries")

// appendDurably appends entries to a session's journal, in batches the
// journal takes, trying each again until it is taken, and returns their
// sequences. It fails only when the host stops (or the journal closes)
// first, with the sequences of those taken.
//
// An entry of a batch that failed may have been kept all the same (its
// ack lost), so a retry can write it twice: readers pass over an action
// whose serverSeq they have had (replayer, readGap).
//
// On a full disk (journal.ErrNoSpace) the host ends the turns running,
// and what it appends then goes to the journal's reserve
// (Journal.AppendReserve): the ends of the work a client saw start. Only
// an append that finds room as any does takes the journal's trouble away.
func (h *Host) appendDurably(session string, entries [][]byte) ([]uint64, error) {
	seqs := make([]uint64, 0, len(entries))
	wait := retryFirst
	reserved := false
	for len(seqs) < len(entries) {
		batch := entries[len(seqs):min(len(entries), len(seqs)+journal.MaxBatch)]
		start := time.Now()
		// An append that waits long for its ack goes on waiting, but the
		// journal counts as failing meanwhile: new work is refused.
		fired := make(chan struct{})
		slow := time.AfterFunc(h.health.slowAfter(), func() {
			defer close(fired)
			h.journalTroubled(session, errSlowJournal)
		})
		var size int64
		for _, e := range batch {
			size += int64(len(e))
		}
		cost := gateCost(len(batch), size)
		if h.gate.acquire(h.health.giving, cost) != nil {
			slow.Stop()
			h.log.Warn("the host stops with actions its journal did not take; they were never sent", "session", session, "entries", len(entries)-len(seqs))
			h.health.lost.Store(true)
			return seqs, errStopping
		}
		token := new(int)
		h.health.appending.Store(token, start)
		got, err := h.opts.Journal.Append(h.health.giving, session, batch...)
		h.health.appending.Delete(token)
		if !slow.Stop() {
			<-fired // its note comes before the one this append's end makes
		}
		if errors.Is(err, journal.ErrNoSpace) {
			h.journalFailed(session, err)
			h.endTurnsForSpace()
			got, err = h.opts.Journal.AppendReserve(h.health.giving, session, batch...)
			reserved = reserved || err == nil
		}
		h.gate.release(cost)
		h.metrics.appendSeconds.Observe(time.Since(start).Seconds())
		seqs = append(seqs, got...)
		if err == nil {
			wait = retryFirst
			continue
		}
		if h.health.giving.Err() != nil || errors.Is(err, journal.ErrClosed) {
			h.log.Warn("the host stops with actions its journal did not take; they were never sent", "session", session, "entries", len(entries)-len(seqs))
			h.health.lost.Store(true)
			return seqs, errStopping
		}
		if errors.Is(err, journal.ErrFenced) {
			return seqs, err // never taken: another host holds the session
		}
		if unwritable(err) {
			h.metrics.journalErrors.Add(1)
			h.log.Error("an entry the journal cannot take is not written; a client that missed it is sent snapshots", "session", session, "err", err)
			return seqs, err
		}
		h.journalFailed(session, err)
		t := time.NewTimer(wait)
		select {
		case <-h.health.giving.Done():
			t.Stop()
			h.log.Warn("the host stops with actions its journal did not take; they were never sent", "session", session, "entries", len(entries)-len(seqs))
			h.health.lost.Store(true)
			return seqs, errStopping
		case <-t.C:
		}
		wait = min(2*wait, retryMost)
	}
	if reserved {
		h.watchForRoom() // nothing else may append until new work is taken again
	} else {
		h.journalWell()
	}
	return seqs, nil
}

// watchForRoom watches, while the journal is in trouble for a full disk, for
// the room an Append needs, and then takes the trouble away, so that new
// work is taken again: the appends that ended the work it stopped went
// to the reserve, and while new work is refused no other append comes to
// find the room. One watcher at a time; it ends with the host.
func (h *Host) watchForRoom() {
	if !h.health.watching.CompareAndSwap(false, true) {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.health.watching.Store(false)
		t := time.NewTicker(roomCheck)
		defer t.Stop()
		for h.health.trouble.Load() != nil {
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
			if h.opts.Journal.Room(h.ctx, false) == nil {
				h.journalWell()
			}
		}
	}()
}

// roomCheck is how often watchForRoom measures the disk.
const roomCheck = 500 * time.Millisecond

// errDiskFull is how a turn the host ends for a full disk ends: a
// chat/error of this errorType (chats.Chat.End).
type errDiskFull struct{}

func (errDiskFull) Error() string {
	return "ahpd stopped this turn: the disk that holds its journal is full, and what the turn did could not be recorded; free some space and send the message again"
}

func (errDiskFull) ErrorType() string { return "diskFull" }

// endTurnsForSpace ends every running turn with errDiskFull, once for a
// run of trouble: on a full disk no work goes on, and each turn's end
// fits in the journal's reserve. It takes each session's lock in turn,
// holding nothing else.
func (h *Host) endTurnsForSpace() {
	t := h.health.trouble.Load()
	if t == nil || !t.turnsEnded.CompareAndSwap(false, true) {
		return
	}
	n := 0
	for _, s := range h.sessionList() {
		n += s.EndTurns(errDiskFull{})
	}
	if n > 0 {
		h.log.Error("the disk that holds the journal is full: the turns running were ended", "turns", n)
	}
}

// journalSlow is how long an append may wait for its ack before the
// journal counts as failing.
const journalSlow = 5 * time.Second

// errSlowJournal is why the journal counts as failing while an append
// waits longer than journalSlow.
var errSlowJournal = fmt.Errorf("it has not acknowledged a write for %s", journalSlow)

// unwritable reports whether an append's error is about what was appended
// (an entry over the journal's bound, which the host's own bounds leave
// only to a turn of a size no client could take), not about the journal:
// trying again cannot help.
func unwritable(err error) bool {
	return errors.Is(err, journal.ErrEntryTooLarge) || errors.Is(err, journal.ErrBatchTooLarge) || errors.Is(err, journal.ErrBadSession)
}

// noteGap records that the actions up to serverSeq last are not all in the
// journal: no replay from the journal spans them.
func (jh *journalHealth) noteGap(last int64) {
	for {
		gap := jh.gap.Load()
		if gap >= last || jh.gap.CompareAndSwap(gap, last) {
			return
		}
	}
}

// journalFailed counts an append that failed and notes the journal in
// trouble.
func (h *Host) journalFailed(session string, err error) {
	h.metrics.journalErrors.Add(1)
	h.journalTroubled(session, err)
}

// journalTroubled notes the journal in trouble, logging the first trouble
// of a run of them.
func (h *Host) journalTroubled(session string, err error) {
	if h.health.trouble.Load() != nil {
		return
	}
	t := &journalTrouble{since: time.Now(), reason: journalReason(err)}
	if h.health.trouble.CompareAndSwap(nil, t) {
		h.health.moved()
		if h.health.stopping.Load() {
			h.health.giveUp()
		}
		h.log.Error("the journal does not take the host's actions; sessions wait for it, and new work is refused until it does",
			"session", session, "err", err)
	}
}

// journalWell notes that an append succeeded.
func (h *Host) journalWell() {
	if t := h.health.trouble.Load(); t != nil && h.health.trouble.CompareAndSwap(t, nil) {
		h.health.moved()
		h.log.Info("the journal takes actions again", "after", time.Since(t.since).Round(time.Millisecond))
		h.sendLeftQueued() // the messages held back meanwhile (heldBackLocked)
	}
}

// journalReason says in a few words why an append failed.
func journalReason(err error) string {
	switch {
	case errors.Is(err, journal.ErrNoSpace):
		return "the disk that holds it is full"
	case errors.Is(err, errSlowJournal):
		return err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "it did not acknowledge a write in time"
	default:
		return err.Error()
	}
}

// journalRefusal says why the host takes no new work now (a turn, a
// session, a chat), or "" when it does: the journal does not take what
// the host writes, and work it cannot record would be work a crash loses.
func (h *Host) journalRefusal() string {
	t := h.health.trouble.Load()
	if t == nil {
		return ""
	}
	return fmt.Sprintf("ahpd cannot record new work now: its journal has failed to store actions since %s (%s); try again once it does",
		t.since.UTC().Format(time.TimeOnly), t.reason)
}

// forgetJournal deletes a disposed session's journal.
func (h *Host) forgetJournal(ctx context.Context, session string) error {
	if h.opts.Journal == nil {
		return nil
	}
	h.marks.forget(session)
	return h.opts.Journal.Delete(ctx, session)
}

// newestSeq is the serverSeq of the journal's newest entry, 0 when it
// holds none or cannot be read.
func newestSeq(opts Options) int64 {
	if opts.Journal == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, ok, err := opts.Journal.Newest(ctx)
	if err != nil {
		opts.Logger.Warn("could not read the journal's newest entry; serverSeq starts at the clock", "err", err)
		return 0
	}
	var env struct {
		ServerSeq int64 `json:"serverSeq"`
	}
	if !ok || json.Unmarshal(e.Data, &env) != nil {
		return 0
	}
	return env.ServerSeq
}

// sessionNewest is the serverSeq of the newest entry of a session's
// journal, 0 when it holds none.
func (h *Host) sessionNewest(ctx context.Context, uri string) (int64, error) {
	j := h.opts.Journal
	last, err := j.SessionLastSeq(ctx, uri)
	if err != nil || last == 0 {
		return 0, err
	}
	es, err := j.Read(ctx, uri, last-1, 1)
	if err != nil || len(es) == 0 {
		return 0, err
	}
	je, err := decodeEntry(es[0].Data)
	if err != nil {
		return 0, fmt.Errorf("the newest entry of %s: %w", uri, err)
	}
	return je.seq, nil
}

// firstSeq is where the host's serverSeqs start: at the clock in
// microseconds, so they rise across restarts, and past the newest one in
// the journal (newest), so they do even if the clock went back.
func firstSeq(opts Options, newest int64) int64 {
	return max(opts.Clock.Now().UnixMicro(), newest)
}

// laneOf is the bus's lane of a channel (fanout.Bus.SetLanes): a
// session's channel and its chats' are written to the session's journal
// in one outbox, so they are one lane, named by the session's id (a
// client may spell a session either way); any other channel is its own.
func laneOf(channel string) string {
	if u, err := protocol.ParseChatURI(channel); err == nil {
		channel = u.Session
	}
	if u, err := protocol.ParseSessionURI(channel); err == nil {
		return "session " + u.ID
	}
	return channel
}
