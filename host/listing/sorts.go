package listing

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/ahpd/ahpd/host/session"
)

// Sort is an order a listing is asked for (listSessions'
// _meta["ahpd.order"]).
type Sort string

// The orders of a listing.
const (
	SortActivity Sort = ""        // most recently modified first: the listing's own
	SortCreated  Sort = "created" // most recently created first
	SortTitle    Sort = "title"   // by title, A to Z in any case, untitled last
)

// GroupRepo groups a listing's rows by the repository they work in
// (listSessions' _meta["ahpd.group"]).
const GroupRepo = "repo"

// Sorting is how a page's rows are ordered: a sort, and optionally
// grouped. Among equals (and within a group) the listing's own order
// holds, so pages are stable.
type Sorting struct {
	Sort  Sort
	Group string // "" or GroupRepo
}

// ParseSorting reads an order and a grouping as listSessions' _meta names
// them ("activity", "created", "title"; "repo"), saying what it takes
// when it does not know one.
func ParseSorting(order, group string) (Sorting, error) {
	var s Sorting
	switch order {
	case "", "activity":
	case string(SortCreated), string(SortTitle):
		s.Sort = Sort(order)
	default:
		return s, fmt.Errorf(`order %q: one of "activity", "created" or "title"`, order)
	}
	switch group {
	case "", GroupRepo:
		s.Group = group
	default:
		return s, fmt.Errorf(`group %q: "repo", or none`, group)
	}
	return s, nil
}

// Name is what a cursor of a page in this order says it is of: "" for
// the listing's own.
func (s Sorting) Name() string {
	if s.Group == "" {
		return string(s.Sort)
	}
	return string(s.Sort) + "/" + s.Group
}

// sortKey is a row's own key in a sort, compared before its place in the
// listing's order.
func sortKey(s Sort, r *session.ListRow) string {
	switch s {
	case SortTitle:
		if r.Summary.Title == "" {
			return "1" // untitled last
		}
		// Cut, so a cursor stays short whatever the titles: titles alike
		// that far are in the listing's own order.
		t := strings.ToLower(r.Summary.Title)
		if len(t) > maxTitleKey {
			t = strings.ToValidUTF8(t[:maxTitleKey], "")
		}
		return "0" + t
	case SortCreated:
		return r.Summary.CreatedAt // protocol.FormatTime: sorts as it reads
	}
	return ""
}

// maxTitleKey is how much of a title, in bytes, the title sort compares.
const maxTitleKey = 80

// compareIn orders keys in sort s.
func compareIn(s Sort, a, b Key) int {
	switch s {
	case SortTitle:
		if c := strings.Compare(a.By, b.By); c != 0 {
			return c
		}
	case SortCreated:
		if c := strings.Compare(b.By, a.By); c != 0 { // newest first
			return c
		}
	}
	return a.Compare(b)
}

// sorted is every row of a snapshot and a view, in one sort. Nobody
// modifies it.
type sorted struct {
	sort Sort
	view *View
	rows []entry // Key.By set
}

// sortCache holds a snapshot's sorted rows, one per sort, each made by the
// first page asking for it with that view.
type sortCache [3]atomic.Pointer[sorted]

func sortIndex(s Sort) int {
	switch s {
	case SortCreated:
		return 1
	case SortTitle:
		return 2
	}
	return 0
}

// sorted returns the snapshot's rows merged with the view's in sort s,
// made once for the snapshot and the view. The external rows whose
// sessions the host holds are left out: they are listed from the session.
func (s *Snapshot) sorted(o *Order, v *View, by Sort) *sorted {
	slot := &s.sorts[sortIndex(by)]
	if c := slot.Load(); c != nil && c.view == v {
		return c
	}
	c := &sorted{sort: by, view: v, rows: make([]entry, 0, len(s.rows)+len(v.keys))}
	oi, ei := 0, 0
	for oi < len(s.rows) || ei < len(v.keys) {
		if oi < len(s.rows) && (ei == len(v.keys) || keyOf(s.rows[oi]).Compare(v.keys[ei].Key) < 0) {
			c.rows = append(c.rows, entry{Key: keyOf(s.rows[oi]), row: s.rows[oi]})
			oi++
			continue
		}
		if !o.Holds(v.keys[ei].Resource) {
			c.rows = append(c.rows, v.keys[ei])
		}
		ei++
	}
	if by != SortActivity {
		for i := range c.rows {
			c.rows[i].By = sortKey(by, c.rows[i].row)
		}
		slices.SortFunc(c.rows, func(a, b entry) int { return compareIn(by, a.Key, b.Key) })
	}
	// Two pages may make it at once: either is the same, and the last kept.
	slot.Store(c)
	return c
}

// after returns the index of the first row after k (0 for nil).
func (c *sorted) after(k *Key) int {
	if k == nil {
		return 0
	}
	i, found := slices.BinarySearchFunc(c.rows, *k, func(e entry, k Key) int { return compareIn(c.sort, e.Key, k) })
	if found {
		i++
	}
	return i
}

// grouped is the page of rows keep keeps, grouped by repository: the
// groups in the order of their first row, the rows of each in order. The
// groups are the asker's: made from the rows it is shown, and counted
// from them.
func grouped(c *sorted, q Query, keep func(entry) bool) Result {
	type member struct {
		e     entry
		group int
	}
	var kept []member
	rank := map[string]int{}
	var names []string
	var leads []Key
	for _, e := range c.rows {
		if !keep(e) {
			continue
		}
		name := e.row.Repo()
		g, ok := rank[name]
		if !ok {
			g = len(names)
			rank[name] = g
			names, leads = append(names, name), append(leads, e.Key)
		}
		kept = append(kept, member{e, g})
	}
	counts := make([]int, len(names))
	for _, m := range kept {
		counts[m.group]++
	}
	// Grouped by a counting sort, keeping each group's rows in order.
	start := make([]int, len(names)+1)
	for g, n := range counts {
		start[g+1] = start[g] + n
	}
	out := make([]member, len(kept))
	next := slices.Clone(start[:len(names)])
	for _, m := range kept {
		out[next[m.group]] = m
		next[m.group]++
	}
	keyAt := func(m member) Key {
		k := m.e.Key
		k.Lead = &leads[m.group]
		return k
	}
	i := 0
	if q.After != nil {
		i, _ = slices.BinarySearchFunc(out, *q.After, func(m member, k Key) int { return compareGrouped(c.sort, keyAt(m), k) })
		if i < len(out) && compareGrouped(c.sort, keyAt(out[i]), *q.After) == 0 {
			i++
		}
	}
	var res Result
	for ; i < len(out); i++ {
		if len(res.Rows) == q.Limit {
			res.More = true
			break
		}
		m := out[i]
		if len(res.Groups) == 0 || res.Groups[len(res.Groups)-1].Name != names[m.group] {
			res.Groups = append(res.Groups, GroupHead{Name: names[m.group], Count: counts[m.group],
				Continued: len(res.Groups) == 0 && i > 0 && out[i-1].group == m.group})
		}
		res.Rows, res.Last = append(res.Rows, m.e.row), keyAt(m)
	}
	return res
}

// compareGrouped orders keys of a grouped listing: by the key of the row
// leading their group, then their own.
func compareGrouped(s Sort, a, b Key) int {
	switch {
	case a.Lead == nil && b.Lead == nil:
	case a.Lead == nil:
		return -1
	case b.Lead == nil:
		return 1
	default:
		if c := compareIn(s, *a.Lead, *b.Lead); c != 0 {
			return c
		}
	}
	return compareIn(s, a, b)
}
