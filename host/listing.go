package host

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// listPage merges the host's own sessions and the external rows shown
// into a page of at most limit rows after the cursor after, for me (with
// mine, only the sessions me owns). It returns the page, the key of its
// last row, and whether more follow.
func (h *Host) listPage(me string, mine bool, after *pageKey, limit int) ([]protocol.SessionSummary, pageKey, bool) {
	// External rows the mode shows; external sessions a client opened are
	// listed by the same rules, from the session. Nobody owns them, so the
	// owner filter keeps none.
	ext := &externalView{}
	if !mine {
		ext = h.externalRows()
	}
	// Both halves are in listing order already (the registry's in
	// h.order, the view sorted when made): the page is their merge from
	// the cursor on, and the rows past it are never looked at.
	own := ownRows{h: h, ext: ext, after: after, mine: mine, me: me, batch: min(limit+1, 512)}
	ei := 0
	if after != nil {
		var found bool
		ei, found = slices.BinarySearchFunc(ext.keys, *after, func(r rowKey, k pageKey) int { return r.compare(k) })
		if found {
			ei++
		}
	}
	nextExt := func() {
		// An external session a client opened is listed from the session.
		for ei < len(ext.keys) && h.order.holds(ext.keys[ei].Resource) {
			ei++
		}
	}
	nextExt()
	// Rows are large: growing the slice row by row would copy a page's
	// worth several times over.
	rows := make([]protocol.SessionSummary, 0, min(limit, h.order.len()+len(ext.keys)))
	var last pageKey
	more := false
	ok, sum := own.next()
	for ok || ei < len(ext.keys) {
		if len(rows) == limit {
			more = true
			break
		}
		if ok && (ei == len(ext.keys) || own.key.compare(ext.keys[ei].pageKey) < 0) {
			rows, last = append(rows, sum), own.key
			ok, sum = own.next()
			continue
		}
		rows, last = append(rows, externalSummary(ext.keys[ei].row)), ext.keys[ei].pageKey
		ei++
		nextExt()
	}
	return rows, last, more
}

// ownRows walks the sessions the host holds in listing order, from a
// cursor on, yielding those a listing shows. It copies a batch of the order
// at a time, so the order's lock is never held while a session's is.
type ownRows struct {
	h     *Host
	ext   *externalView
	after *pageKey // where the walk resumes
	mine  bool     // the owner filter
	me    string   // who asks
	batch int

	keys []rowKey
	i    int
	done bool
	key  pageKey // the key of the row last returned
}

// next returns the next listed session's row; false when there are no
// more.
func (w *ownRows) next() (bool, protocol.SessionSummary) {
	for {
		if w.i == len(w.keys) {
			if w.done {
				return false, protocol.SessionSummary{}
			}
			w.keys, w.i = w.h.order.next(w.keys[:0], w.after, w.batch), 0
			w.done = len(w.keys) < w.batch
			if len(w.keys) == 0 {
				return false, protocol.SessionSummary{}
			}
			w.after = new(w.keys[len(w.keys)-1].pageKey)
		}
		k := w.keys[w.i]
		w.i++
		if sum, listed := k.s.Listed(w.mine, w.me, w.ext.byURI); listed {
			w.key = k.pageKey
			return true, sum
		}
	}
}

// rowKey is a catalogue row's place in the listing order.
type rowKey struct {
	pageKey
	s   *session.Session // a session the host holds, or
	row *catalogue.Row   // an external row of the catalogue
}

// compare orders rows most recently modified first, then by URI, so pages
// are stable.
func (k pageKey) compare(o pageKey) int {
	if c := strings.Compare(o.ModifiedAt, k.ModifiedAt); c != 0 {
		return c
	}
	return strings.Compare(k.Resource, o.Resource)
}

// pageKey is where a page ended: the last row served.
type pageKey struct {
	ModifiedAt string `json:"m"`
	Resource   string `json:"r"`
}

// cursorKey signs cursors, so a cursor this host did not issue is refused
// rather than guessed at.
type cursorKey []byte

func newCursorKey() cursorKey {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func (k cursorKey) seal(p pageKey) string {
	data, _ := json.Marshal(p)
	mac := hmac.New(sha256.New, k)
	mac.Write(data)
	return base64.RawURLEncoding.EncodeToString(append(mac.Sum(nil)[:16], data...))
}

func (k cursorKey) open(cursor string) (pageKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) < 17 {
		return pageKey{}, errForeignCursor
	}
	mac := hmac.New(sha256.New, k)
	mac.Write(raw[16:])
	if !hmac.Equal(raw[:16], mac.Sum(nil)[:16]) {
		return pageKey{}, errForeignCursor
	}
	var p pageKey
	if err := json.Unmarshal(raw[16:], &p); err != nil {
		return pageKey{}, errForeignCursor
	}
	return p, nil
}

var errForeignCursor = errors.New("not a cursor this host issued: start again without one")
