package listing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Key is a row's place in the listing order, and where a page ended: the
// last row served.
type Key struct {
	ModifiedAt string `json:"m"`
	Resource   string `json:"r"`
	// In another order than the listing's own (Sorting): which (its
	// Name), the row's own key in it (sortKey), and, grouped, the key of
	// the row leading the row's group.
	Order string `json:"o,omitempty"`
	By    string `json:"b,omitempty"`
	Lead  *Key   `json:"l,omitempty"`
}

// Compare orders rows most recently modified first, then by URI, so pages
// are stable: the listing's own order, and the last of any other's.
func (k Key) Compare(o Key) int {
	if c := strings.Compare(o.ModifiedAt, k.ModifiedAt); c != 0 {
		return c
	}
	return strings.Compare(k.Resource, o.Resource)
}

// Cursors signs the cursors a host issues, so one it did not issue is
// refused rather than guessed at. A host makes one key when it starts:
// cursors do not outlive it.
type Cursors []byte

// NewCursors returns a fresh random key.
func NewCursors() Cursors {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// Seal returns the cursor of a page that ended at p.
func (k Cursors) Seal(p Key) string {
	data, _ := json.Marshal(p)
	mac := hmac.New(sha256.New, k)
	mac.Write(data)
	return base64.RawURLEncoding.EncodeToString(append(mac.Sum(nil)[:16], data...))
}

// Open returns where the page of a cursor Seal made ended, or
// ErrForeignCursor.
func (k Cursors) Open(cursor string) (Key, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) < 17 {
		return Key{}, ErrForeignCursor
	}
	mac := hmac.New(sha256.New, k)
	mac.Write(raw[16:])
	if !hmac.Equal(raw[:16], mac.Sum(nil)[:16]) {
		return Key{}, ErrForeignCursor
	}
	var p Key
	if err := json.Unmarshal(raw[16:], &p); err != nil {
		return Key{}, ErrForeignCursor
	}
	return p, nil
}

// ErrForeignCursor is a cursor this host did not issue (another host's,
// one from before a restart, or garbage).
var ErrForeignCursor = errors.New("not a cursor this host issued: start again without one")
