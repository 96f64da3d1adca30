package host

import (
	"context"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// The journal (docs/JOURNAL.md): every action a session emits is written
// to the session's journal, under its URI, before any client is sent it,
// so whatever a client saw is there after a crash. The bus numbers a run
// of actions (its serverSeqs), the journal takes them, and the bus then
// sends them, holding back whatever was numbered after them meanwhile;
// the entries are the envelopes as clients get them, serverSeq included.
// A write that fails is logged and counted, and the actions go out all the
// same: a client is not kept waiting on a journal it cannot have.

// publish sends a run of actions to the bus, written down first when the
// outbox is a session's and the host keeps a journal.
func (h *Host) publish(key string, run []effect) {
	if h.opts.Journal == nil || key == "" {
		h.bus.PublishAll(items(run))
		return
	}
	bt := h.bus.Reserve(items(run))
	defer h.bus.Release(bt)
	h.writeDown(key, bt.Envelopes())
}

// writeDown appends envelopes to a session's journal, in order.
func (h *Host) writeDown(session string, envs []protocol.ActionEnvelope) {
	entries := make([][]byte, len(envs))
	for i := range envs {
		// Append reports a value JSON cannot hold but writes valid JSON in
		// its place, as the frame sent does.
		entries[i], _ = protocol.Append(nil, &envs[i])
	}
	for len(entries) > 0 {
		n := min(len(entries), journal.MaxBatch)
		if _, err := h.opts.Journal.Append(h.ctx, session, entries[:n]...); err != nil {
			h.journalFailed(session, err)
			return
		}
		entries = entries[n:]
	}
	if h.journalFailing.CompareAndSwap(true, false) {
		h.log.Info("the journal takes actions again")
	}
}

// journalFailed counts a write to the journal that failed, and logs the
// first of a run of them.
func (h *Host) journalFailed(session string, err error) {
	h.metrics.journalErrors.Add(1)
	if !h.journalFailing.Swap(true) {
		h.log.Error("could not write to the journal; actions go out unrecorded until it takes them again", "session", session, "err", err)
	}
}

// forgetJournal deletes a disposed session's journal.
func (h *Host) forgetJournal(ctx context.Context, session string) error {
	if h.opts.Journal == nil {
		return nil
	}
	return h.opts.Journal.Delete(ctx, session)
}
