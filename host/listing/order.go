package listing

import (
	"slices"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

// Item is a session the host holds, as a listing sees it.
type Item interface {
	// URI is the session's; it never changes.
	URI() string
	// Listed returns the session's row and whether a listing for me
	// shows it (with mine, only sessions me owns; without all, only those
	// me may read); shown is the external rows the listing shows, by URI.
	Listed(mine bool, me string, all bool, shown map[string]bool) (protocol.SessionSummary, bool)
}

// entry is a row's place in the listing order, with the row: a session
// the host holds (item) or an external row of the catalogue (row).
type entry struct {
	Key
	item Item
	row  *catalogue.Row
}

// Order keeps the sessions the host holds in listing order, most recently
// modified first, so that a listing pages from it instead of sorting ten
// thousand sessions on every call.
//
// The keys are held oldest first: a session that moves does so because it
// was just modified, to the newest end, and one recently active is near
// that end already, so a move shifts few entries. Listing walks from the
// newest end.
//
// mu is taken alone, as a session joins or leaves the registry and as its
// modifiedAt moves (from its outbox). A listing copies a run of entries
// out under it and asks each item after letting it go.
type Order struct {
	mu   lockcheck.RWMutex
	keys []entry           // oldest first; every entry has item set
	at   map[string]string // session URI -> the modifiedAt it is filed under
}

// NewOrder returns an empty order.
func NewOrder() *Order {
	return &Order{mu: lockcheck.RWMutex{Class: "order"}, at: map[string]string{}}
}

// before orders keys oldest first: the listing's order, reversed.
func before(a entry, k Key) int { return -a.Compare(k) }

// Add files a session under its modifiedAt, or moves it there.
func (o *Order) Add(s Item, modifiedAt string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fileLocked(s, modifiedAt)
}

// Move refiles a session whose modifiedAt moved; one the order does not
// hold (not yet in the registry, or gone from it) stays out.
func (o *Order) Move(s Item, modifiedAt string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.at[s.URI()]; ok {
		o.fileLocked(s, modifiedAt)
	}
}

func (o *Order) fileLocked(s Item, modifiedAt string) {
	uri := s.URI()
	if old, ok := o.at[uri]; ok {
		if old == modifiedAt {
			return
		}
		o.removeLocked(uri, old)
	}
	k := entry{Key: Key{modifiedAt, uri}, item: s}
	i, _ := slices.BinarySearchFunc(o.keys, k.Key, before)
	o.keys = slices.Insert(o.keys, i, k)
	o.at[uri] = modifiedAt
}

// Remove drops a session.
func (o *Order) Remove(s Item) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.at[s.URI()]; ok {
		o.removeLocked(s.URI(), old)
	}
}

func (o *Order) removeLocked(uri, modifiedAt string) {
	if i, found := slices.BinarySearchFunc(o.keys, Key{modifiedAt, uri}, before); found {
		o.keys = slices.Delete(o.keys, i, i+1)
	}
	delete(o.at, uri)
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

// next appends to dst up to n entries that follow after in listing order
// (from the newest when after is nil) and returns it.
func (o *Order) next(dst []entry, after *Key, n int) []entry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	end := len(o.keys) // entries [0, end) come after the key, newest last
	if after != nil {
		end, _ = slices.BinarySearchFunc(o.keys, *after, before)
	}
	for i := end - 1; i >= 0 && n > 0; i, n = i-1, n-1 {
		dst = append(dst, o.keys[i])
	}
	return dst
}
