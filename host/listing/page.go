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
	// By is the order of the rows; the zero Sorting is the listing's
	// own, most recently modified first.
	By Sorting
}

// Result is a page.
type Result struct {
	Rows []*session.ListRow
	Last Key  // the key of the last row, where the next page starts
	More bool // rows follow
	// Groups heads the groups the page's rows are in, in order, when the
	// order groups them.
	Groups []GroupHead
}

// GroupHead is one group on a page: its name, how many rows the whole
// listing has in it, and whether its rows began on an earlier page.
type GroupHead struct {
	Name      string `json:"name"`
	Count     int    `json:"count"`
	Continued bool   `json:"continued,omitzero"`
}

// Page merges the host's own sessions and the external rows v shows into
// a page of at most q.Limit rows after q.After, in q.By. It reads the
// order's snapshot and the rows in it: no session's lock. Its Last says
// which order it is of (Key.Order).
func Page(o *Order, v *View, q Query) Result {
	res := page(o, v, q)
	res.Last.Order = q.By.Name()
	return res
}

// noView shows no external row: one value, so that the orders a snapshot
// makes for it are made once (Snapshot.sorted).
var noView = &View{}

func page(o *Order, v *View, q Query) Result {
	if v == nil || q.Mine {
		// External sessions a client opened are listed by the same rules,
		// from the session; nobody owns them, so the owner filter keeps
		// none.
		v = noView
	}
	snap := o.Snapshot()
	keep := func(e entry) bool {
		return (e.ext || e.row.Shows(q.Mine, q.Me, q.All, v.byURI)) && (q.Match == nil || q.Match(e.row))
	}
	switch {
	case q.By.Group != "":
		return grouped(snap.sorted(o, v, q.By.Sort), q, keep)
	case q.By.Sort != SortActivity:
		s := snap.sorted(o, v, q.By.Sort)
		return walkFrom(s, s.after(q.After), q, keep)
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

// walkFrom is the page of the rows of s that keep keeps, from index i.
func walkFrom(s *sorted, i int, q Query, keep func(entry) bool) Result {
	var res Result
	for ; i < len(s.rows); i++ {
		e := s.rows[i]
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
