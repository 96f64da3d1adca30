package host

import (
	"cmp"
	"context"
	"slices"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// Replay from the journal. A client that reconnects is replayed what it
// missed from the bus's ring when the ring still holds it, else from the
// journal when the journal holds it all, else it is sent snapshots. The
// journal's entries are the envelopes clients were sent, each written
// before it was sent; marks say where in a session's journal a serverSeq
// is, so a gap is read from near its start, not from the session's
// beginning.

// maxJournalReplay bounds what a reconnect reads from the journal: a
// client further behind gets snapshots, which are smaller by then.
const maxJournalReplay = 100_000

// journalMarks remembers, per journal (a session's URI, or root's), the
// journal sequence of some serverSeqs written to it: the first of each
// append, thinned to at most maxMarks, so a mark is never far before a
// gap's start. They are lost with the process, as the clients that could
// use them are.
type journalMarks struct {
	mu lockcheck.Mutex // taken alone
	by map[string][]journalMark
}

type journalMark struct{ serverSeq, seq int64 }

const maxMarks = 1024

func (m *journalMarks) note(key string, serverSeq int64, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string][]journalMark{}
	}
	list := append(m.by[key], journalMark{serverSeq, int64(seq)})
	if len(list) > maxMarks {
		// Every other one goes: the marks stay spread over the journal.
		kept := list[:0]
		for i := 0; i < len(list); i += 2 {
			kept = append(kept, list[i])
		}
		list = kept
	}
	m.by[key] = list
}

// before returns the journal sequence to read after to find every entry
// of key past serverSeq: that of the last mark at or before it, less one;
// 0 (the start) when there is none.
func (m *journalMarks) before(key string, serverSeq int64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.by[key]
	i := firstMarkFrom(list, serverSeq+1)
	if i == 0 {
		return 0
	}
	return uint64(list[i-1].seq - 1)
}

// atOrAfter returns the journal sequence of the first mark of key at or
// past serverSeq: every entry of key from it on has a serverSeq at least
// that; false when there is none.
func (m *journalMarks) atOrAfter(key string, serverSeq int64) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.by[key]
	i := firstMarkFrom(list, serverSeq)
	if i == len(list) {
		return 0, false
	}
	return uint64(list[i].seq), true
}

// firstMarkFrom is the index of the first mark of list (in serverSeq
// order) at or past serverSeq, len(list) for none.
func firstMarkFrom(list []journalMark, serverSeq int64) int {
	i, _ := slices.BinarySearchFunc(list, serverSeq, func(mk journalMark, s int64) int { return cmp.Compare(mk.serverSeq, s) })
	return i
}

func (m *journalMarks) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.by, key)
}

// replayFromJournal returns the actions of channels, to which c is
// attached up to upTo (fanout.Bus.Attach), that c missed after seen, read
// from the journal. It fails, leaving c unsubscribed, when the journal
// does not hold them all, and says why: tooFarBehind when the gap is past
// what is kept (no journal, retention, an entry the journal could not
// take, more than maxJournalReplay), notReplayable when it cannot be read
// (a channel not journaled, the journal unreadable).
func (h *Host) replayFromJournal(ctx context.Context, c *conn.Conn, seen, upTo int64, channels []string) ([]protocol.ActionEnvelope, string) {
	fail := func(why string) ([]protocol.ActionEnvelope, string) {
		h.unsubscribeFrom(c, channels)
		return nil, why
	}
	j := h.opts.Journal
	switch {
	case seen < 0:
		return fail(notReplayable) // not a serverSeq
	case j == nil || h.health.gap.Load() > seen:
		return fail(tooFarBehind)
	}
	keys := map[string]bool{}
	want := map[string]bool{}
	for _, ch := range channels {
		key, ok := h.journalOf(c, ch)
		if !ok {
			return fail(notReplayable)
		}
		keys[key], want[ch] = true, true
	}
	out := []protocol.ActionEnvelope{}
	for key := range keys {
		envs, why := h.readGap(ctx, j, key, seen, upTo)
		if why != "" {
			return fail(why)
		}
		for _, env := range envs {
			if want[env.Channel] && c.Wants(env.Action.Type()) {
				out = append(out, env)
			}
		}
	}
	slices.SortFunc(out, func(a, b protocol.ActionEnvelope) int { return int(a.ServerSeq - b.ServerSeq) })
	return out, ""
}

// unsubscribeFrom takes c's subscriptions to channels back.
func (h *Host) unsubscribeFrom(c *conn.Conn, channels []string) {
	for _, ch := range channels {
		h.bus.Unsubscribe(c, ch)
	}
}

// journalOf names the journal a channel's actions are written to.
func (h *Host) journalOf(c *conn.Conn, channel string) (string, bool) {
	ch, err := h.resolve(c, channel)
	if err != nil {
		return "", false
	}
	switch ch := ch.(type) {
	case rootChannel:
		return protocol.RootURI, true
	case sessionChannel:
		return ch.s.URI(), h.numbersHere(ch.s.ID())
	case chatChannel:
		return ch.s.URI(), h.numbersHere(ch.s.ID())
	}
	return "", false
}

// numbersHere reports whether this host numbers the session's actions:
// on a host sharing sessions, only those it holds. Another host's
// serverSeqs in the shared journal are not this host's, and a client of
// this one watching such a session is sent snapshots instead.
func (h *Host) numbersHere(id string) bool {
	return h.cluster == nil || h.cluster.Holds(id)
}

// readGap reads key's entries with a serverSeq in (seen, upTo], failing,
// with why, when some of them are no longer kept or there are too many.
func (h *Host) readGap(ctx context.Context, j *journal.Journal, key string, seen, upTo int64) ([]protocol.ActionEnvelope, string) {
	after := h.marks.before(key, seen)
	kept, err := j.KeptFrom(ctx, key)
	if err != nil {
		h.log.Warn("could not read the journal for a replay", "journal", key, "err", err)
		return nil, notReplayable
	}
	if after == 0 {
		// No mark before the gap (this process did not write it, or
		// kept no mark so far back): the journal is searched.
		var found bool
		if after, found, err = h.seekGap(ctx, j, key, seen, max(kept, 1)-1); err != nil {
			h.log.Warn("could not search the journal for a replay", "journal", key, "err", err)
			return nil, notReplayable
		}
		if !found && kept > 1 {
			return nil, tooFarBehind // every entry kept is past seen: the gap may begin before them
		}
	}
	if kept > 0 && after+1 < kept {
		return nil, tooFarBehind // the gap may begin before what is kept
	}
	var out []protocol.ActionEnvelope
	var copies dupes
	for read := 0; read < maxJournalReplay; {
		entries, err := j.Read(ctx, key, after, journal.MaxReadLimit)
		if err != nil {
			h.log.Warn("could not read the journal for a replay", "journal", key, "err", err)
			return nil, notReplayable
		}
		for _, e := range entries {
			after = e.Seq
			if copies.seen(e.Data) {
				continue
			}
			je, err := decodeEntry(e.Data)
			if err != nil {
				return nil, notReplayable
			}
			if je.seq > upTo {
				return out, ""
			}
			if je.env != nil && je.seq > seen {
				out = append(out, *je.env)
			}
		}
		read += len(entries)
		if len(entries) < journal.MaxReadLimit {
			return out, ""
		}
	}
	return nil, tooFarBehind
}

// seekSpan is how close seekGap comes to a gap's start before the read
// takes over: one page's worth is read anyway.
const seekSpan = 256

// seekGap finds where in key's journal the entries past serverSeq seen
// begin, when no mark says: the journal sequence of an entry at or before
// seen near the last one, found by bisection from lo (every entry up to
// it is at or before seen, or lo is where what is kept begins), one
// request a step. found says such an entry was seen. It relies on a
// session's serverSeqs rising through its journal, as the host writes
// them.
func (h *Host) seekGap(ctx context.Context, j *journal.Journal, key string, seen int64, lo uint64) (at uint64, found bool, err error) {
	hi, err := j.SessionLastSeq(ctx, key)
	if err != nil {
		return 0, false, err
	}
	if e, ok, err := j.Seek(ctx, key, lo+1); err != nil || !ok {
		return lo, false, err
	} else if je, err := decodeEntry(e.Data); err != nil {
		return 0, false, err
	} else if je.seq > seen {
		return lo, false, nil // the first kept is past seen already
	} else {
		lo, found = e.Seq, true
	}
	for lo < hi && hi-lo > seekSpan {
		mid := lo + (hi-lo)/2
		e, ok, err := j.Seek(ctx, key, mid)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			hi = mid
			continue
		}
		je, err := decodeEntry(e.Data)
		if err != nil {
			return 0, false, err
		}
		if je.seq <= seen {
			lo = e.Seq
		} else {
			hi = mid
		}
	}
	return lo, found, nil
}
