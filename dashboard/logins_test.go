package dashboard

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// TestLoginsBoundedAndExpiring checks that the logins table never holds
// more than its bound, lets a person's oldest login go first, and
// forgets a login once it expired.
func TestLoginsBoundedAndExpiring(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLogins(loginBounds{max: 3, perPerson: 20, livePerson: 32}, time.Hour, func() time.Time { return now })
	cred := grants.Credential{Principal: grants.UserPrincipal("mo")}
	first, _, _ := l.open(cred)
	now = now.Add(time.Minute)
	var ids []string
	for range 5 {
		id, in, err := l.open(cred)
		if err != nil {
			t.Fatal(err)
		}
		if in.csrf == "" || len(id) < 40 {
			t.Fatalf("a login id %q or CSRF token %q too short", id, in.csrf)
		}
		ids = append(ids, id)
	}
	if l.size() != 3 {
		t.Fatalf("%d logins open, the bound is 3", l.size())
	}
	if _, ok := l.get(first); ok {
		t.Fatal("the oldest login outlived a full table")
	}
	if _, ok := l.get(ids[4]); !ok {
		t.Fatal("the newest login is gone")
	}
	now = now.Add(time.Hour)
	if _, ok := l.get(ids[4]); ok {
		t.Fatal("a login outlived its hour")
	}
	if _, ok := l.get(""); ok {
		t.Fatal("the empty id is a login")
	}
}

// TestLoginsBudgetedPerPerson signs people in, a minute apart, into
// small tables, and checks whose logins are left: a person past their
// budget, or signing in to a full table, loses only their own oldest,
// and a table full of other people's refuses until one of them expires.
func TestLoginsBudgetedPerPerson(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max, per int
		signIns  []string      // who signs in, in turn
		later    time.Duration // more time before the last sign-in
		gone     []int         // the sign-ins whose logins were let go
		refused  bool          // the last sign-in is refused
		wait     time.Duration // with this wait
	}{{
		name:    "past the budget a person's own oldest goes",
		max:     10,
		per:     2,
		signIns: []string{"root", "mo", "mo", "gus", "mo"},
		gone:    []int{1},
	}, {
		name:    "a full table lets the signing-in person's own oldest go",
		max:     3,
		per:     3,
		signIns: []string{"mo", "root", "gus", "mo"},
		gone:    []int{0},
	}, {
		name:    "a full table of other people's refuses, saying when the first ends",
		max:     3,
		per:     2,
		signIns: []string{"mo", "mo", "root", "gus"},
		refused: true,
		wait:    time.Hour - 3*time.Minute,
	}, {
		name:    "a full table lets expired logins go first",
		max:     3,
		per:     2,
		signIns: []string{"mo", "mo", "root", "gus"},
		later:   time.Hour - 3*time.Minute,
		gone:    []int{0},
	}, {
		name:    "a budget above the table's bound is the table's",
		max:     2,
		per:     20,
		signIns: []string{"mo", "mo", "mo"},
		gone:    []int{0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			l := newLogins(loginBounds{max: tc.max, perPerson: tc.per, livePerson: 32}, time.Hour, func() time.Time { return now })
			ids := make([]string, len(tc.signIns))
			for i, who := range tc.signIns {
				last := i == len(tc.signIns)-1
				now = now.Add(time.Minute)
				if last {
					now = now.Add(tc.later)
				}
				id, _, err := l.open(credOf(who))
				var full *errTableFull
				switch {
				case last && tc.refused:
					if !errors.As(err, &full) || full.wait != tc.wait {
						t.Fatalf("sign-in %d (%s): %v, want refused with a wait of %v", i, who, err, tc.wait)
					}
					continue
				case err != nil:
					t.Fatalf("sign-in %d (%s) refused: %v", i, who, err)
				}
				ids[i] = id
			}
			open := 0
			for i, id := range ids {
				if id == "" {
					continue
				}
				in, ok := l.get(id)
				if ok == slices.Contains(tc.gone, i) {
					t.Errorf("sign-in %d (%s): open %v, want %v", i, tc.signIns[i], ok, !ok)
				}
				if ok {
					open++
					if in.cred != credOf(tc.signIns[i]) {
						t.Errorf("sign-in %d (%s) is %s's login", i, tc.signIns[i], in.cred.Principal)
					}
				}
			}
			if l.size() != open {
				t.Errorf("%d logins in the table, %d of them open", l.size(), open)
			}
		})
	}
}

func credOf(who string) grants.Credential {
	if who == "root" {
		return grants.Credential{Principal: grants.RootPrincipal("test")}
	}
	return grants.Credential{Principal: grants.UserPrincipal(who)}
}

// TestStreamsBudgeted checks the live streams' two bounds: a login's 16,
// and a person's across their logins, which a stream keeps counting in
// after its login was let go.
func TestStreamsBudgeted(t *testing.T) {
	l := newLogins(loginBounds{max: 10, perPerson: 2, livePerson: 20}, time.Hour, time.Now)
	_, a, _ := l.open(credOf("mo"))
	_, b, _ := l.open(credOf("mo"))
	gid, g, _ := l.open(credOf("gus"))
	for range maxStreams {
		if err := l.openStream(a); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		in   *login
		want error
	}{
		{"a login's 17th", a, errLoginStreams},
		{"the person's 17th to 20th, on another login", b, nil},
		{"", b, nil}, {"", b, nil}, {"", b, nil},
		{"the person's 21st", b, errPersonStreams},
		{"another person's first", g, nil},
	} {
		if err := l.openStream(tc.in); err != tc.want {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Signing in twice more lets a and b go, but not their streams.
	_, c, _ := l.open(credOf("mo"))
	l.open(credOf("mo"))
	if err := l.openStream(c); err != errPersonStreams {
		t.Fatalf("a new login's stream while the let-go logins' are open: %v", err)
	}
	l.closeStream(a)
	if err := l.openStream(c); err != nil {
		t.Fatalf("a stream once one closed: %v", err)
	}
	for range maxStreams - 1 {
		l.closeStream(a)
	}
	for range 4 {
		l.closeStream(b)
	}
	l.closeStream(c)
	// A person with a stream and no login is kept until it closes.
	l.close(gid)
	if !l.hasPerson("gus", 1) {
		t.Fatal("gus was forgotten with a stream open")
	}
	l.closeStream(g)
	if l.hasPerson("gus", 0) || !l.hasPerson("mo", 0) {
		t.Fatal("gus was kept with no login and no stream, or mo was forgotten with two logins")
	}
}

// hasPerson reports whether the table keeps who, with streams open.
func (l *logins) hasPerson(who string, streams int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.people[credOf(who).Principal]
	return p != nil && p.streams == streams
}

func TestCSRFCheck(t *testing.T) {
	in := &login{csrf: "abc"}
	for tok, want := range map[string]bool{"abc": true, "abd": false, "": false, "abcd": false} {
		if in.csrfOK(tok) != want {
			t.Errorf("csrfOK(%q) = %v", tok, !want)
		}
	}
}
