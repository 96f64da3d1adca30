package dashboard

import (
	"testing"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// TestLoginsBoundedAndExpiring checks that the logins table never holds
// more than its bound, lets the login nearest its end go first, and
// forgets a login once it expired.
func TestLoginsBoundedAndExpiring(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLogins(3, time.Hour, func() time.Time { return now })
	cred := grants.Credential{Principal: grants.UserPrincipal("mo")}
	first, _ := l.open(cred)
	now = now.Add(time.Minute)
	var ids []string
	for range 5 {
		id, in := l.open(cred)
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

func TestCSRFCheck(t *testing.T) {
	in := &login{csrf: "abc"}
	for tok, want := range map[string]bool{"abc": true, "abd": false, "": false, "abcd": false} {
		if in.csrfOK(tok) != want {
			t.Errorf("csrfOK(%q) = %v", tok, !want)
		}
	}
}
