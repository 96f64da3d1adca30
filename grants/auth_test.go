package grants

import (
	"errors"
	"testing"
)

func TestAuthenticator(t *testing.T) {
	d := testDirectory(t)
	personal, _ := d.IssueToken("bob", "")
	const conn = "the-deployment-token"
	root := RootPrincipal("build-01")

	type try struct {
		token string
		want  Principal
		ok    bool
	}
	tests := []struct {
		name string
		a    *Authenticator
		try  []try
	}{
		{"connection token and users", &Authenticator{Host: "build-01", ConnectionToken: conn, Users: d}, []try{
			{conn, root, true},
			{personal, UserPrincipal("bob"), true},
			{"", Principal{}, false},
			{conn + "x", Principal{}, false},
			{"wrong", Principal{}, false},
		}},
		{"connection token, no users directory", &Authenticator{Host: "build-01", ConnectionToken: conn}, []try{
			{conn, root, true},
			{personal, Principal{}, false},
			{"", Principal{}, false},
		}},
		{"a nil directory is none", &Authenticator{Host: "build-01", ConnectionToken: conn, Users: (*Directory)(nil)}, []try{
			{conn, root, true},
			{personal, Principal{}, false},
		}},
		{"no token asked, no users directory", &Authenticator{Host: "build-01"}, []try{
			{"", root, true},
			{"anything", root, true},
		}},
		{"no connection token, users", &Authenticator{Host: "build-01", Users: d}, []try{
			{personal, UserPrincipal("bob"), true},
			{"", Principal{}, false},
			{"anything", Principal{}, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, try := range tt.try {
				got, ok := tt.a.Authenticate(try.token)
				if got != try.want || ok != try.ok {
					t.Errorf("Authenticate(%q) = %s, %v; want %s, %v", try.token, got, ok, try.want, try.ok)
				}
			}
		})
	}
	a := &Authenticator{Host: "build-01", Users: d}
	if a.Root() != root || a.Directory() != d {
		t.Error("Root or Directory")
	}
}

// TestRecheck logs in with each kind of token, changes the directory, and
// checks which credentials it still accepts.
func TestRecheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, d *Directory)
		// want is what Recheck says of bob's laptop token, bob's other
		// token, carol's token and the connection token.
		laptop, other, carol, root error
	}{
		{name: "no change"},
		{name: "one token revoked", change: func(t *testing.T, d *Directory) {
			must(t, d.Revoke("bob", "laptop"))
		}, laptop: ErrTokenRevoked},
		{name: "every token revoked", change: func(t *testing.T, d *Directory) {
			must(t, d.RevokeAll("bob"))
		}, laptop: ErrTokenRevoked, other: ErrTokenRevoked},
		{name: "user removed", change: func(t *testing.T, d *Directory) {
			must(t, d.Remove("bob"))
		}, laptop: ErrUserRemoved, other: ErrUserRemoved},
		{name: "removed and added again", change: func(t *testing.T, d *Directory) {
			must(t, d.Remove("bob"))
			must(t, d.Add("bob", "", Member))
		}, laptop: ErrTokenRevoked, other: ErrTokenRevoked},
		// A role is read afresh by every Check: the connection stays.
		{name: "role lowered", change: func(t *testing.T, d *Directory) {
			must(t, d.SetRole("bob", Guest))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testDirectory(t)
			laptop, _ := d.IssueToken("bob", "laptop")
			other, _ := d.IssueToken("bob", "desk")
			carol, _ := d.IssueToken("carol", "")
			a := &Authenticator{Host: "build-01", ConnectionToken: "conn", Users: d}
			login := func(token string) Credential {
				c, ok := a.Login(token)
				if !ok {
					t.Fatalf("Login refused a good token")
				}
				return c
			}
			creds := []Credential{login(laptop), login(other), login(carol), login("conn")}
			if tt.change != nil {
				tt.change(t, d)
			}
			for i, want := range []error{tt.laptop, tt.other, tt.carol, tt.root} {
				if got := a.Recheck(creds[i]); !errors.Is(got, want) || (want == nil) != (got == nil) {
					t.Errorf("Recheck(%s, credential %d) = %v, want %v", creds[i].Principal, i, got, want)
				}
			}
		})
	}
	if err := (&Authenticator{}).Recheck(Credential{Principal: RootPrincipal("h")}); err != nil {
		t.Errorf("a hand-made root credential: %v", err)
	}
	if (&Authenticator{Users: testDirectory(t)}).Changed() != nil {
		t.Error("a fixed directory says it can change")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
