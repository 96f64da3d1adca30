package listing

import (
	"slices"

	"github.com/ahpd/ahpd/protocol"
)

// Query is what a page is asked for.
type Query struct {
	Me    string // who asks
	Mine  bool   // only the sessions Me owns (no external rows: nobody owns them)
	All   bool   // Me sees every session, those kept private by others too
	After *Key   // where the previous page ended; nil: from the start
	Limit int    // at most this many rows
	// Match keeps the rows it is true of (Search); nil keeps them all.
	// The rows it drops are walked past, not counted against Limit.
	Match func(*protocol.SessionSummary) bool
}

// Page merges the host's own sessions and the external rows v shows into
// a page of at most q.Limit rows after q.After. It returns the page, the
// key of its last row, and whether more follow.
func Page(o *Order, v *View, q Query) ([]protocol.SessionSummary, Key, bool) {
	if v == nil || q.Mine {
		// External sessions a client opened are listed by the same rules,
		// from the session; nobody owns them, so the owner filter keeps
		// none.
		v = &View{}
	}
	// Both halves are in listing order already (the order's, and the view
	// sorted when made): the page is their merge from the cursor on, and
	// the rows past it are never looked at.
	own := ownRows{o: o, shown: v.byURI, after: q.After, mine: q.Mine, me: q.Me, all: q.All, match: q.Match, batch: min(q.Limit+1, 512)}
	if q.Match != nil {
		own.batch = 512 // most rows may be walked past
	}
	ei := 0
	if q.After != nil {
		var found bool
		ei, found = slices.BinarySearchFunc(v.keys, *q.After, func(r entry, k Key) int { return r.Compare(k) })
		if found {
			ei++
		}
	}
	nextExt := func() {
		// An external session a client opened is listed from the session.
		for ei < len(v.keys) && o.Holds(v.keys[ei].Resource) {
			ei++
		}
	}
	nextExt()
	// Rows are large: growing the slice row by row would copy a page's
	// worth several times over.
	rows := make([]protocol.SessionSummary, 0, min(q.Limit, o.Len()+len(v.keys)))
	var last Key
	more := false
	ok, sum := own.next()
	for ok || ei < len(v.keys) {
		if len(rows) == q.Limit {
			more = true
			break
		}
		if ok && (ei == len(v.keys) || own.key.Compare(v.keys[ei].Key) < 0) {
			rows, last = append(rows, sum), own.key
			ok, sum = own.next()
			continue
		}
		sum := summary(v.keys[ei].row)
		if q.Match == nil || q.Match(&sum) {
			rows, last = append(rows, sum), v.keys[ei].Key
		}
		ei++
		nextExt()
	}
	return rows, last, more
}

// ownRows walks the sessions the host holds in listing order, from a
// cursor on, yielding those a listing shows. It copies a batch of the order
// at a time, so the order's lock is never held while a session's is.
type ownRows struct {
	o     *Order
	shown map[string]bool // the external rows the listing shows
	after *Key            // where the walk resumes
	mine  bool            // the owner filter
	me    string          // who asks
	all   bool            // me sees private sessions
	match func(*protocol.SessionSummary) bool
	batch int

	keys []entry
	i    int
	done bool
	key  Key // the key of the row last returned
}

// next returns the next listed session's row; false when there are no
// more.
func (w *ownRows) next() (bool, protocol.SessionSummary) {
	for {
		if w.i == len(w.keys) {
			if w.done {
				return false, protocol.SessionSummary{}
			}
			w.keys, w.i = w.o.next(w.keys[:0], w.after, w.batch), 0
			w.done = len(w.keys) < w.batch
			if len(w.keys) == 0 {
				return false, protocol.SessionSummary{}
			}
			w.after = new(w.keys[len(w.keys)-1].Key)
		}
		k := w.keys[w.i]
		w.i++
		if sum, listed := k.item.Listed(w.mine, w.me, w.all, w.shown); listed && (w.match == nil || w.match(&sum)) {
			w.key = k.Key
			return true, sum
		}
	}
}
