package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// The journal (docs/JOURNAL.md): every action a session emits is written
// to the session's journal, under its URI, before any client is sent it,
// so whatever a client saw is there after a crash. The bus numbers a run
// of actions (its serverSeqs), the journal takes them, and the bus then
// sends them, holding back whatever was numbered after them meanwhile;
// the entries are the envelopes as clients get them, serverSeq included.
// Root's actions are written to a journal of root's own. A write that
// fails is logged and counted, and the actions go out all the same: a
// client is not kept waiting on a journal it cannot have.

// appendTimeout bounds the wait for the journal to take a run of actions.
const appendTimeout = 5 * time.Second

// publish sends a run of actions to the bus, written down first when the
// outbox has a journal (a session's, root's) and the host keeps one. It
// returns the bytes written to the journal.
func (h *Host) publish(key string, run []effect) int64 {
	if h.opts.Journal == nil || key == "" {
		h.bus.PublishAll(items(run))
		return 0
	}
	bt := h.bus.Reserve(items(run))
	defer h.bus.Release(bt)
	return h.writeDown(key, bt.Envelopes())
}

// writeDown appends envelopes to a session's journal, in order, and
// returns their bytes.
func (h *Host) writeDown(session string, envs []protocol.ActionEnvelope) int64 {
	entries := make([][]byte, len(envs))
	var size int64
	for i := range envs {
		// Append reports a value JSON cannot hold but writes valid JSON in
		// its place, as the frame sent does.
		entries[i], _ = protocol.Append(nil, &envs[i])
		size += int64(len(entries[i]))
	}
	// Everything numbered after these waits for them: a journal that does
	// not answer holds the host's clients up this long at most.
	ctx, cancel := context.WithTimeout(h.ctx, appendTimeout)
	defer cancel()
	for i := 0; i < len(entries); {
		n := min(len(entries)-i, journal.MaxBatch)
		seqs, err := h.opts.Journal.Append(ctx, session, entries[i:i+n]...)
		if err != nil {
			h.journalFailed(session, err, envs[len(envs)-1].ServerSeq)
			return size
		}
		h.marks.note(session, envs[i].ServerSeq, seqs[0])
		i += n
	}
	if h.journalFailing.CompareAndSwap(true, false) {
		h.log.Info("the journal takes actions again")
	}
	return size
}

// journalFailed counts a write to the journal that failed, and logs the
// first of a run of them. A client that missed actions up to last cannot
// be replayed them from the journal.
func (h *Host) journalFailed(session string, err error, last int64) {
	h.metrics.journalErrors.Add(1)
	for {
		gap := h.journalGap.Load()
		if gap >= last || h.journalGap.CompareAndSwap(gap, last) {
			break
		}
	}
	if !h.journalFailing.Swap(true) {
		h.log.Error("could not write to the journal; actions go out unrecorded until it takes them again", "session", session, "err", err)
	}
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

// firstSeq is where the host's serverSeqs start: at the clock in
// microseconds, so they rise across restarts, and past the newest one in
// the journal (newest), so they do even if the clock went back.
func firstSeq(opts Options, newest int64) int64 {
	return max(opts.Clock.Now().UnixMicro(), newest)
}
