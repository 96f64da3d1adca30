package listing

import (
	"slices"
	"sync/atomic"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Item is a session the host holds, as a listing sees it.
type Item interface {
	// URI is the session's; it never changes.
	URI() string
	// Row is the session's newest listing row, read without its lock.
	Row() *session.ListRow
}

// entry is a row's place in the listing order, with the row: a session
// the host holds or an external row of the catalogue.
type entry struct {
	Key
	row *session.ListRow
	ext bool // an external row: listed to anyone the view is shown to
}

// Order keeps the sessions the host holds in listing order, most recently
// modified first, each with its newest row, so that a listing pages from
// it instead of sorting ten thousand sessions, or asking each, on every
// call.
//
// The keys are held oldest first: a session that moves does so because it
// was just modified, to the newest end, and one recently active is near
// that end already, so a move shifts few entries.
//
// A listing reads a Snapshot: the order as it was, newest first, that
// nobody modifies. It is made from the keys at most once per run of
// changes, by the first listing after them, and shared by every listing
// until the next change; a change costs a session's outbox a binary
// search and a short shift, never a copy.
//
// mu is taken alone, as a session joins or leaves the registry and as its
// row changes (from its outbox). A session's row is read under it without
// the session's lock (Item.Row).
type Order struct {
	mu   lockcheck.RWMutex
	keys []entry                     // oldest first
	at   map[string]*session.ListRow // session URI -> the row filed
	snap atomic.Pointer[Snapshot]    // nil once the keys changed since
}

// NewOrder returns an empty order.
func NewOrder() *Order {
	return &Order{mu: lockcheck.RWMutex{Class: "order"}, at: map[string]*session.ListRow{}}
}

// keyOf is a session's row's place in the listing order: the key it is
// filed under, as its URI is its summary's resource.
func keyOf(r *session.ListRow) Key {
	return Key{ModifiedAt: r.Summary.ModifiedAt, Resource: r.Summary.Resource}
}

// before orders keys oldest first: the listing's order, reversed.
func before(a entry, k Key) int { return -a.Compare(k) }

// Add files a session under its newest row, or refiles it.
func (o *Order) Add(s Item) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fileLocked(s)
}

// Update refiles a session whose row changed; one the order does not hold
// (not yet in the registry, or gone from it) stays out. The row is read
// here, not passed: one made before the session was added is never filed
// over a newer one.
func (o *Order) Update(s Item) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.at[s.URI()]; ok {
		o.fileLocked(s)
	}
}

func (o *Order) fileLocked(s Item) {
	r := s.Row()
	if r == nil {
		return
	}
	uri := s.URI()
	k := Key{ModifiedAt: r.Summary.ModifiedAt, Resource: uri}
	if old, ok := o.at[uri]; ok {
		if old == r {
			return
		}
		if old.Summary.ModifiedAt == r.Summary.ModifiedAt {
			// Its place is the same: the row is swapped where it is.
			if i, found := slices.BinarySearchFunc(o.keys, k, before); found {
				o.keys[i].row = r
				o.at[uri] = r
				o.snap.Store(nil)
				return
			}
		}
		o.removeLocked(uri, old.Summary.ModifiedAt)
	}
	i, _ := slices.BinarySearchFunc(o.keys, k, before)
	o.keys = slices.Insert(o.keys, i, entry{Key: k, row: r})
	o.at[uri] = r
	o.snap.Store(nil)
}

// Remove drops a session.
func (o *Order) Remove(s Item) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.at[s.URI()]; ok {
		o.removeLocked(s.URI(), old.Summary.ModifiedAt)
	}
}

func (o *Order) removeLocked(uri, modifiedAt string) {
	if i, found := slices.BinarySearchFunc(o.keys, Key{ModifiedAt: modifiedAt, Resource: uri}, before); found {
		o.keys = slices.Delete(o.keys, i, i+1)
	}
	delete(o.at, uri)
	o.snap.Store(nil)
}

// Len returns how many sessions the order holds.
func (o *Order) Len() int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return len(o.keys)
}

// Holds reports whether a session of that URI is in the registry.
func (o *Order) Holds(uri string) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	_, ok := o.at[uri]
	return ok
}

// Snapshot is the order at one moment, newest first. Nobody modifies
// it; the other orders made from it are made once, by the first page
// asking (sorts.go).
type Snapshot struct {
	rows  []*session.ListRow // newest first
	sorts sortCache
}

// Snapshot returns the order as it is now.
func (o *Order) Snapshot() *Snapshot {
	if s := o.snap.Load(); s != nil {
		return s
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if s := o.snap.Load(); s != nil {
		return s // made by another listing meanwhile
	}
	// Rows, not entries: a copy of 10,000 pointers, not six times their
	// size, for each run of changes.
	s := &Snapshot{rows: make([]*session.ListRow, len(o.keys))}
	for i, e := range o.keys {
		s.rows[len(o.keys)-1-i] = e.row
	}
	// Stored under the read lock: a change, which clears it, waits for the
	// write lock, so what is stored is never older than a change.
	o.snap.Store(s)
	return s
}

// Len is how many sessions the snapshot holds.
func (s *Snapshot) Len() int { return len(s.rows) }

// after returns the index of the first row after k (0 for nil).
func (s *Snapshot) after(k *Key) int {
	if k == nil {
		return 0
	}
	i, found := slices.BinarySearchFunc(s.rows, *k, func(r *session.ListRow, k Key) int { return keyOf(r).Compare(k) })
	if found {
		i++
	}
	return i
}
