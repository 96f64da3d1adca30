package listing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// TestSessionOrder files, moves and drops sessions at random and checks
// that every walk of the order, from the start and from any cursor, is the
// registry sorted as a listing sorts it.
func TestSessionOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	o := NewOrder()
	held := map[*item]string{} // the model: session -> modifiedAt
	var all []*item
	for i := range 200 {
		all = append(all, newItem(fmt.Sprintf("ahp-session:/s%03d", i)))
	}
	at := func() string { return fmt.Sprintf("2026-01-01T00:%02d:00.000Z", r.IntN(60)) } // ties are common
	for step := range 5000 {
		s := all[r.IntN(len(all))]
		switch op := r.IntN(10); {
		case op < 4:
			m := at()
			s.set(m)
			o.Add(s)
			held[s] = m
		case op < 8:
			m := at()
			if s.row != nil {
				m = max(m, s.row.Summary.ModifiedAt) // modifiedAt only moves on
			}
			s.set(m)
			o.Update(s)
			if _, ok := held[s]; ok {
				held[s] = m
			}
		default:
			o.Remove(s)
			delete(held, s)
		}
		if step%100 != 0 {
			continue
		}
		var want []Key
		for s, m := range held {
			want = append(want, Key{ModifiedAt: m, Resource: s.URI()})
		}
		slices.SortFunc(want, Key.Compare)
		if got := walk(o, nil, 1+r.IntN(50)); !slices.Equal(got, want) {
			t.Fatalf("step %d: the order walks\n%v\nwant\n%v", step, got, want)
		}
		if len(want) > 0 {
			from := r.IntN(len(want))
			if got := walk(o, &want[from], 7); !slices.Equal(got, want[from+1:]) {
				t.Fatalf("step %d: after %v the order walks\n%v\nwant\n%v", step, want[from], got, want[from+1:])
			}
		}
		for s := range held {
			if !o.Holds(s.URI()) {
				t.Fatalf("step %d: %s is not held", step, s.URI())
			}
		}
	}
}

// walk pages through the order's snapshots from after, n entries at a
// time.
func walk(o *Order, after *Key, n int) []Key {
	var out []Key
	for {
		snap := o.Snapshot()
		page := snap.rows[snap.after(after):]
		page = page[:min(n, len(page))]
		for _, r := range page {
			out = append(out, keyOf(r))
		}
		if len(page) < n {
			return out
		}
		after = new(keyOf(page[len(page)-1]))
	}
}

// BenchmarkSessionOrderMove is what keeping the order costs a session whose
// modifiedAt moves, among 10,000: an idle one (the oldest, every entry
// shifts) and the most active (the newest, next to nothing shifts).
func BenchmarkSessionOrderMove(b *testing.B) {
	o := NewOrder()
	items := map[string]*item{}
	for i := range 10000 {
		s := newItem(fmt.Sprintf("ahp-session:/s%05d", i))
		s.set(fmt.Sprintf("2026-01-01T00:00:00.%09dZ", i))
		o.Add(s)
		items[s.uri] = s
	}
	stamp := 0
	now := func() string { stamp++; return fmt.Sprintf("2026-02-01T00:00:00.%09dZ", stamp) }
	move := func(uri string) {
		s := items[uri]
		s.set(now())
		o.Update(s)
	}
	b.Run("oldest", func(b *testing.B) {
		for b.Loop() {
			move(o.keys[0].Resource)
		}
	})
	b.Run("newest", func(b *testing.B) {
		for b.Loop() {
			move(o.keys[len(o.keys)-1].Resource)
		}
	})
}

// item is a session as the order sees it: its URI and its newest row,
// listed to anyone.
type item struct {
	uri string
	row *session.ListRow
}

func newItem(uri string) *item { return &item{uri: uri} }

// set gives the session a new row, modified at m.
func (i *item) set(m string) {
	i.row = session.NewOwnedListRow(protocol.SessionSummary{Resource: i.uri, ModifiedAt: m}, "", false)
}

func (i *item) URI() string { return i.uri }

func (i *item) Row() *session.ListRow { return i.row }
