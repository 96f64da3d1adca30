package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// A login is what a signed-in browser's cookie stands for: the
// credential its token gave, the CSRF token of its forms, and when it
// ends. Only the server knows the mapping; the cookie is an opaque random
// id.
type login struct {
	cred    grants.Credential
	csrf    string
	expires time.Time
	streams atomic.Int32 // live streams open
}

// maxStreams bounds the live streams one login keeps open at once (a
// tab each).
const maxStreams = 16

// openStream counts a live stream of the login's, or reports false when
// it has as many as it may.
func (in *login) openStream() bool {
	if in.streams.Add(1) > maxStreams {
		in.streams.Add(-1)
		return false
	}
	return true
}

func (in *login) closeStream() { in.streams.Add(-1) }

// logins is the bounded table of open logins.
type logins struct {
	mu    sync.Mutex
	byID  map[string]*login
	max   int
	ttl   time.Duration
	now   func() time.Time
	newID func() string
}

func newLogins(max int, ttl time.Duration, now func() time.Time) *logins {
	return &logins{byID: map[string]*login{}, max: max, ttl: ttl, now: now, newID: func() string { return randomToken(32) }}
}

// randomToken is n random bytes in unpadded base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// open starts a login for cred and returns its id. A full table first
// lets the expired logins go, then the one nearest its end.
func (l *logins) open(cred grants.Credential) (string, *login) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.byID) >= l.max {
		l.sweepLocked(now)
	}
	for len(l.byID) >= l.max {
		var oldest string
		for id, in := range l.byID {
			if oldest == "" || in.expires.Before(l.byID[oldest].expires) {
				oldest = id
			}
		}
		delete(l.byID, oldest)
	}
	id := l.newID()
	in := &login{cred: cred, csrf: randomToken(32), expires: now.Add(l.ttl)}
	l.byID[id] = in
	return id, in
}

func (l *logins) sweepLocked(now time.Time) {
	for id, in := range l.byID {
		if !now.Before(in.expires) {
			delete(l.byID, id)
		}
	}
}

// get returns the login id names, if it is open and not expired.
func (l *logins) get(id string) (*login, bool) {
	if id == "" || len(id) > 64 {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.byID[id]
	if !ok {
		return nil, false
	}
	if !l.now().Before(in.expires) {
		delete(l.byID, id)
		return nil, false
	}
	return in, true
}

// close ends a login.
func (l *logins) close(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byID, id)
}

// size is how many logins are open.
func (l *logins) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byID)
}

// csrfOK says whether a form's token is its login's, in constant time.
func (in *login) csrfOK(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(in.csrf)) == 1
}
