package host

import (
	"context"
	"slices"

	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

// maxTimelineScan bounds the journal entries one timeline page reads: a
// session longer than that is paged with after and before.
const maxTimelineScan = 200_000

// timeline reads a page of a session's timeline from its journal: the
// events with a serverSeq after p.After and before p.Before, of p.Kinds,
// oldest first from After, else the newest first.
func (h *Host) timeline(ctx context.Context, session string, p eventsParams) ([]timeline.Event, bool, error) {
	want := func(k timeline.Kind) bool { return len(p.Kinds) == 0 || slices.Contains(p.Kinds, k) }
	var start uint64
	if p.After != nil {
		start = h.marks.before(session, *p.After)
	}
	var page []timeline.Event // oldest first; newest first keeps the last limit+1
	more := false
	scanned := 0
	var copies dupes
	for scanned < maxTimelineScan {
		entries, err := h.opts.Journal.Read(ctx, session, start, journal.MaxReadLimit)
		if err != nil {
			return nil, false, protocol.Errorf(protocol.CodeInternalError, "reading the session's journal: %v", err)
		}
		for _, e := range entries {
			start = e.Seq
			if copies.seen(e.Data) {
				continue
			}
			je, err := decodeEntry(e.Data)
			if err != nil || je.snap != nil {
				continue // a snapshot, or an entry this version cannot read, is no event
			}
			if (p.After != nil && je.seq <= *p.After) || (p.Before != nil && je.seq >= *p.Before) {
				continue
			}
			events := timeline.OfResidency(session, je.residency, je.seq, e.Time)
			if je.env != nil {
				events = timeline.Of(*je.env, e.Time)
			}
			for _, ev := range events {
				if !want(ev.Kind) {
					continue
				}
				page = append(page, ev)
				if p.After != nil && len(page) > p.Limit {
					return page[:p.Limit], true, nil
				}
				if p.After == nil && len(page) > 2*p.Limit {
					page = slices.Delete(page, 0, len(page)-p.Limit-1)
				}
			}
		}
		scanned += len(entries)
		if len(entries) < journal.MaxReadLimit {
			break
		}
	}
	if p.After != nil {
		return page, false, nil
	}
	if len(page) > p.Limit {
		page, more = page[len(page)-p.Limit:], true
	}
	slices.Reverse(page)
	return page, more, nil
}
