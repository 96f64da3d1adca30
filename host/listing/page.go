package listing

import (
	"slices"

	"github.com/ahpd/ahpd/host/session"
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
	Match func(*session.ListRow) bool
}

// Result is a page.
type Result struct {
	Rows []*session.ListRow
	Last Key  // the key of the last row, where the next page starts
	More bool // rows follow
}

// Page merges the host's own sessions and the external rows v shows into
// a page of at most q.Limit rows after q.After. It reads the order's
// snapshot and the rows in it: no session's lock.
func Page(o *Order, v *View, q Query) Result {
	if v == nil || q.Mine {
		// External sessions a client opened are listed by the same rules,
		// from the session; nobody owns them, so the owner filter keeps
		// none.
		v = &View{}
	}
	snap := o.Snapshot()
	keep := func(e entry) bool {
		return (e.ext || e.row.Shows(q.Mine, q.Me, q.All, v.byURI)) && (q.Match == nil || q.Match(e.row))
	}
	// Both halves are in listing order already (the snapshot's, and the
	// view sorted when made): the page is their merge from the cursor on,
	// and the rows past it are never looked at.
	var res Result
	oi, ei := snap.after(q.After), v.after(q.After)
	nextExt := func() {
		// An external session a client opened is listed from the session.
		for ei < len(v.keys) && o.Holds(v.keys[ei].Resource) {
			ei++
		}
	}
	nextExt()
	for oi < len(snap.rows) || ei < len(v.keys) {
		var e entry
		if oi < len(snap.rows) && (ei == len(v.keys) || keyOf(snap.rows[oi]).Compare(v.keys[ei].Key) < 0) {
			e = entry{Key: keyOf(snap.rows[oi]), row: snap.rows[oi]}
			oi++
		} else {
			e = v.keys[ei]
			ei++
			nextExt()
		}
		if !keep(e) {
			continue
		}
		if len(res.Rows) == q.Limit {
			res.More = true
			break
		}
		res.Rows, res.Last = append(res.Rows, e.row), e.Key
	}
	return res
}

// after returns the index of the first of the view's rows after k (0 for
// nil).
func (v *View) after(k *Key) int {
	if k == nil {
		return 0
	}
	i, found := slices.BinarySearchFunc(v.keys, *k, func(r entry, k Key) int { return r.Compare(k) })
	if found {
		i++
	}
	return i
}
