package host

import (
	"slices"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// sessionOrder keeps the sessions the host holds in listing order, most
// recently modified first, so that a listing pages from it instead of
// sorting ten thousand sessions on every call.
//
// The keys are held oldest first: a session that moves does so because it
// was just modified, to the newest end, and one recently active is near
// that end already, so a move shifts few entries. Listing walks from the
// newest end.
//
// mu is taken alone, as a session joins or leaves the registry and as its
// modifiedAt moves (from its outbox). A listing copies a run of entries
// out under it and reads each session after letting it go.
type sessionOrder struct {
	mu   lockcheck.RWMutex
	keys []rowKey          // oldest first; every entry has s set
	at   map[string]string // session URI -> the modifiedAt it is filed under
}

func newSessionOrder() *sessionOrder {
	return &sessionOrder{mu: lockcheck.RWMutex{Class: "order"}, at: map[string]string{}}
}

// before orders keys oldest first: the listing's order, reversed.
func before(a rowKey, k pageKey) int { return -a.compare(k) }

// add files a session under its modifiedAt, or moves it there.
func (o *sessionOrder) add(s *session.Session, modifiedAt string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fileLocked(s, modifiedAt)
}

// move refiles a session whose modifiedAt moved; one the order does not
// hold (not yet in the registry, or gone from it) stays out.
func (o *sessionOrder) move(s *session.Session, modifiedAt string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.at[s.URI()]; ok {
		o.fileLocked(s, modifiedAt)
	}
}

func (o *sessionOrder) fileLocked(s *session.Session, modifiedAt string) {
	if old, ok := o.at[s.URI()]; ok {
		if old == modifiedAt {
			return
		}
		o.removeLocked(s.URI(), old)
	}
	k := rowKey{pageKey: pageKey{modifiedAt, s.URI()}, s: s}
	i, _ := slices.BinarySearchFunc(o.keys, k.pageKey, before)
	o.keys = slices.Insert(o.keys, i, k)
	o.at[s.URI()] = modifiedAt
}

// remove drops a session.
func (o *sessionOrder) remove(s *session.Session) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.at[s.URI()]; ok {
		o.removeLocked(s.URI(), old)
	}
}

func (o *sessionOrder) removeLocked(uri, modifiedAt string) {
	if i, found := slices.BinarySearchFunc(o.keys, pageKey{modifiedAt, uri}, before); found {
		o.keys = slices.Delete(o.keys, i, i+1)
	}
	delete(o.at, uri)
}

// len returns how many sessions the order holds.
func (o *sessionOrder) len() int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return len(o.keys)
}

// holds reports whether a session of that URI is in the registry.
func (o *sessionOrder) holds(uri string) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	_, ok := o.at[uri]
	return ok
}

// next appends to dst up to n entries that follow after in listing order
// (from the newest when after is nil) and returns it.
func (o *sessionOrder) next(dst []rowKey, after *pageKey, n int) []rowKey {
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
