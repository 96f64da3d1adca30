package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
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
	streams int // live streams open, under the table's lock
}

// maxStreams bounds the live streams one login keeps open at once (a
// tab each).
const maxStreams = 16

// person is what the table keeps of one principal across their logins,
// so that what one person does is bounded by their own budget and costs
// nobody else a login or a live page.
type person struct {
	ids     []string // their logins' ids, oldest first
	streams int      // live streams open on their logins, those let go among them
}

// logins is the bounded table of open logins. Its lock guards the logins
// and the people both: a login's budget is checked against its person's
// in one step.
type logins struct {
	mu         sync.Mutex
	byID       map[string]*login
	people     map[grants.Principal]*person
	max        int // logins in the table
	perPerson  int // logins of one person
	livePerson int // live streams of one person
	ttl        time.Duration
	now        func() time.Time
	newID      func() string
}

// loginBounds are the table's bounds.
type loginBounds struct {
	max, perPerson, livePerson int
}

func newLogins(b loginBounds, ttl time.Duration, now func() time.Time) *logins {
	return &logins{byID: map[string]*login{}, people: map[grants.Principal]*person{},
		max: b.max, perPerson: b.perPerson, livePerson: b.livePerson,
		ttl: ttl, now: now, newID: func() string { return randomToken(32) }}
}

// randomToken is n random bytes in unpadded base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// errTableFull is a sign-in refused because every login in the table is
// another person's and none has expired: letting one go would sign
// somebody out for somebody else.
type errTableFull struct {
	wait time.Duration // until the soonest of them ends
}

func (e *errTableFull) Error() string {
	return "the dashboard's logins table is full of other people's logins"
}

// open starts a login for cred and returns its id. A person past their
// budget lets their own oldest login go. A full table first lets the
// expired logins go, then the person's own oldest; when the person has
// none, the sign-in is refused (*errTableFull).
func (l *logins) open(cred grants.Credential) (string, *login, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	p := l.people[cred.Principal]
	for p != nil && len(p.ids) > 0 && len(p.ids) >= l.perPerson {
		l.dropLocked(p.ids[0])
	}
	if len(l.byID) >= l.max {
		l.sweepLocked(now)
	}
	for len(l.byID) >= l.max {
		// The person's entry may be gone with their expired logins.
		p = l.people[cred.Principal]
		if p == nil || len(p.ids) == 0 {
			return "", nil, &errTableFull{wait: l.soonestLocked().Sub(now)}
		}
		l.dropLocked(p.ids[0])
	}
	id := l.newID()
	in := &login{cred: cred, csrf: randomToken(32), expires: now.Add(l.ttl)}
	l.byID[id] = in
	p = l.people[cred.Principal]
	if p == nil {
		p = &person{}
		l.people[cred.Principal] = p
	}
	p.ids = append(p.ids, id)
	return id, in, nil
}

// dropLocked lets the login id go, and its person when they have no
// login and no stream left.
func (l *logins) dropLocked(id string) {
	in, ok := l.byID[id]
	if !ok {
		return
	}
	delete(l.byID, id)
	p := l.people[in.cred.Principal]
	if p == nil {
		return
	}
	if i := slices.Index(p.ids, id); i >= 0 {
		p.ids = slices.Delete(p.ids, i, i+1)
	}
	l.forgetLocked(in.cred.Principal, p)
}

func (l *logins) forgetLocked(who grants.Principal, p *person) {
	if len(p.ids) == 0 && p.streams <= 0 {
		delete(l.people, who)
	}
}

func (l *logins) sweepLocked(now time.Time) {
	for id, in := range l.byID {
		if !now.Before(in.expires) {
			l.dropLocked(id)
		}
	}
}

// soonestLocked is when the first of the table's logins ends.
func (l *logins) soonestLocked() time.Time {
	var first time.Time
	for _, in := range l.byID {
		if first.IsZero() || in.expires.Before(first) {
			first = in.expires
		}
	}
	return first
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
		l.dropLocked(id)
		return nil, false
	}
	return in, true
}

// close ends a login.
func (l *logins) close(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(id)
}

// size is how many logins are open.
func (l *logins) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byID)
}

// The bounds a live stream may be refused by.
var (
	errLoginStreams  = errors.New("too many live pages are open on this login")
	errPersonStreams = errors.New("too many live pages are open on this person's logins")
)

// openStream counts a live stream of in's, or says which bound it would
// pass. A stream outlives its login being let go (signing in past the
// budget does not cut the tabs of the login it lets go), so its person is
// kept until it closes: a person cannot pass their budget by signing in
// again.
func (l *logins) openStream(in *login) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in.streams >= maxStreams {
		return errLoginStreams
	}
	p := l.people[in.cred.Principal]
	if p != nil && p.streams >= l.livePerson {
		return errPersonStreams
	}
	if p == nil {
		p = &person{}
		l.people[in.cred.Principal] = p
	}
	in.streams++
	p.streams++
	return nil
}

// closeStream gives back a stream openStream counted.
func (l *logins) closeStream(in *login) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in.streams--
	if p := l.people[in.cred.Principal]; p != nil {
		p.streams--
		l.forgetLocked(in.cred.Principal, p)
	}
}

// csrfOK says whether a form's token is its login's, in constant time.
func (in *login) csrfOK(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(in.csrf)) == 1
}
