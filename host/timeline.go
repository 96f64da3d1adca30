package host

import (
	"context"
	"slices"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

// maxTimelineScan bounds the journal entries one timeline page reads: a
// session longer than that is paged with after and before.
const maxTimelineScan = 200_000

// timelineBatch is how many entries one read of the journal takes: a page
// holds at most one batch of entries in memory besides its events.
const timelineBatch = 256

// timeline reads a page of a session's timeline from its journal: the
// events with a serverSeq after p.After and before p.Before, of p.Kinds,
// oldest first from After, else the newest first. The events of one
// action (a turn's start and its message share a serverSeq) are never
// split between pages, since the next page starts after or before that
// serverSeq: a page holds those of its last action whole, a few more
// than p.Limit at most.
func (h *Host) timeline(ctx context.Context, session string, p eventsParams) ([]timeline.Event, bool, error) {
	if p.After != nil {
		return h.timelineOldest(ctx, session, p)
	}
	return h.timelineNewest(ctx, session, p)
}

// timelineOldest reads forward from the mark before p.After until the
// page is full.
func (h *Host) timelineOldest(ctx context.Context, session string, p eventsParams) ([]timeline.Event, bool, error) {
	r := h.newTimelineReader(session, p)
	var page []timeline.Event
	full := false
	_, err := r.scan(ctx, h.marks.before(session, *p.After), 0, func(ev timeline.Event) bool {
		if len(page) >= p.Limit && ev.Seq != page[len(page)-1].Seq {
			full = true
			return false
		}
		page = append(page, ev)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return page, full, nil
}

// timelineNewest reads the session's journal backwards in windows, each
// twice as long as the one after it, from its last entry (or the first
// mark past p.Before) until the page is full or the journal's start is
// reached: a page of the newest events costs what it holds, not what the
// session does.
func (h *Host) timelineNewest(ctx context.Context, session string, p eventsParams) ([]timeline.Event, bool, error) {
	end, err := h.opts.Journal.SessionLastSeq(ctx, session)
	if err != nil {
		return nil, false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
	}
	end++ // exclusive
	if p.Before != nil {
		if at, ok := h.marks.atOrAfter(session, *p.Before); ok && at < end {
			end = at
		}
	}
	r := h.newTimelineReader(session, p)
	var page []timeline.Event // oldest first: the newest limit+1 found so far
	window := uint64(4 * p.Limit)
	for end > 1 && r.scanned < maxTimelineScan {
		start := uint64(0)
		if end > window+1 {
			start = end - 1 - window
		}
		var part []timeline.Event // this window's, oldest first, its newest limit+1
		if _, err := r.scan(ctx, start, end, func(ev timeline.Event) bool {
			part = append(part, ev)
			if len(part) > 2*(p.Limit+1) {
				part = newestAndOne(part, p.Limit)
			}
			return true
		}); err != nil {
			return nil, false, err
		}
		// A copy of an entry (an append tried again) can lie in the window
		// after its first: what this window holds at or past the least
		// serverSeq of those read is such a copy, and the windows before
		// it skip it.
		r.floor = r.least
		page = newestAndOne(append(part, page...), p.Limit)
		if len(newest(page, p.Limit)) < len(page) || start == 0 {
			break // one older than the page is found: there is more
		}
		end, window = start+1, 2*window
	}
	kept := newest(page, p.Limit)
	more := len(kept) < len(page)
	slices.Reverse(kept)
	return kept, more, nil
}

// newestAndOne is newest(events, n) and the event before it, if any: what
// says there is more.
func newestAndOne(events []timeline.Event, n int) []timeline.Event {
	kept := newest(events, n)
	if len(kept) == len(events) {
		return events
	}
	return events[len(events)-len(kept)-1:]
}

// newest is the newest n of events (oldest first), with the older ones
// that share the serverSeq of the oldest of them.
func newest(events []timeline.Event, n int) []timeline.Event {
	if len(events) <= n {
		return events
	}
	cut := len(events) - n
	for cut > 0 && events[cut-1].Seq == events[cut].Seq {
		cut--
	}
	return events[cut:]
}

// timelineReader turns a session's journal entries into the events a
// page asks for.
type timelineReader struct {
	h       *Host
	session string
	p       eventsParams
	copies  dupes
	scanned int
	least   int64 // the least serverSeq of the entries read; 0 for none
	floor   int64 // entries at or past it are copies of ones read; 0 for none
}

func (h *Host) newTimelineReader(session string, p eventsParams) *timelineReader {
	return &timelineReader{h: h, session: session, p: p}
}

// scan hands take the events of the entries after the journal sequence
// after and before end (0: no end), oldest first, until take says stop;
// it reports whether it was stopped.
func (r *timelineReader) scan(ctx context.Context, after, end uint64, take func(timeline.Event) bool) (bool, error) {
	p := r.p
	want := func(k timeline.Kind) bool { return len(p.Kinds) == 0 || slices.Contains(p.Kinds, k) }
	for r.scanned < maxTimelineScan {
		n := timelineBatch
		if end > 0 {
			if end <= after+1 {
				return false, nil
			}
			n = int(min(uint64(n), end-after-1))
		}
		entries, err := r.h.opts.Journal.Read(ctx, r.session, after, n)
		if err != nil {
			return false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
		}
		for _, e := range entries {
			if end > 0 && e.Seq >= end {
				return false, nil
			}
			after = e.Seq
			r.scanned++
			if r.copies.seen(e.Data) {
				continue
			}
			je, err := decodeEntry(e.Data)
			if err != nil || je.snap != nil {
				continue // a snapshot, or an entry this version cannot read, is no event
			}
			if r.floor > 0 && je.seq >= r.floor {
				continue
			}
			if je.seq > 0 && (r.least == 0 || je.seq < r.least) {
				r.least = je.seq
			}
			if (p.After != nil && je.seq <= *p.After) || (p.Before != nil && je.seq >= *p.Before) {
				continue
			}
			events := timeline.OfResidency(r.session, je.residency, je.seq, e.Time)
			if je.env != nil {
				events = timeline.Of(*je.env, e.Time)
			}
			for _, ev := range events {
				if want(ev.Kind) && !take(ev) {
					return true, nil
				}
			}
		}
		if len(entries) < n {
			return false, nil
		}
	}
	return false, nil
}
