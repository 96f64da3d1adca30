package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLinkSignIn checks that ?tkn= signs in once: the token goes into
// the login and a redirect takes it out of the address, keeping the rest
// of it; a token the host does not take leads to the sign-in page saying
// so, once, and never shows the token.
func TestLinkSignIn(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser()
	r := b.get("/ui/session?uri=ahp-session:/x&tkn=" + url.QueryEscape(e.tokens["mo"]))
	loc := r.header.Get("Location")
	if r.status != http.StatusSeeOther || loc != "/ui/session?uri=ahp-session%3A%2Fx" {
		t.Fatalf("the link: %d, Location %q", r.status, loc)
	}
	if !strings.Contains(r.header.Get("Set-Cookie"), "ahpd_ui=") || strings.Contains(r.header.Get("Set-Cookie"), e.tokens["mo"]) {
		t.Fatalf("the link's cookie: %q", r.header.Get("Set-Cookie"))
	}
	if r := b.get("/ui/"); r.status != http.StatusOK || !strings.Contains(r.body, "user:mo") {
		t.Fatalf("after the link: %d %.300s", r.status, r.body)
	}
	// A second link replaces the login, as signing in again does.
	if r := b.get("/ui/?tkn=" + url.QueryEscape(e.tokens["gus"]) + "&sort=title"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/?sort=title" {
		t.Fatalf("the second link: %d %q", r.status, r.header.Get("Location"))
	}
	if r := b.get("/ui/"); !strings.Contains(r.body, "user:gus") {
		t.Fatalf("after the second link: %.300s", r.body)
	}

	// A bad token: the redirect, then the sign-in page saying why, once.
	bad := e.browser()
	r = bad.get("/ui/?tkn=not-a-token")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/" {
		t.Fatalf("a bad link: %d %q", r.status, r.header.Get("Location"))
	}
	r = bad.get("/ui/")
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "The link&#39;s token is not one this host accepts") || strings.Contains(r.body, "not-a-token") {
		t.Fatalf("after a bad link: %d %s", r.status, r.body)
	}
	if r = bad.get("/ui/"); r.status != http.StatusUnauthorized || strings.Contains(r.body, "The link&#39;s token") {
		t.Fatalf("the sign-in page again: %d %s", r.status, r.body)
	}
	// A bad link does not sign out whoever is signed in.
	if r := b.get("/ui/?tkn=not-a-token"); r.status != http.StatusSeeOther {
		t.Fatalf("a bad link when signed in: %d", r.status)
	}
	if r := b.get("/ui/"); r.status != http.StatusOK || !strings.Contains(r.body, "user:gus") {
		t.Fatalf("after a bad link, signed in: %d", r.status)
	}
}

// TestLinkOpenHost checks that on a host that asks no token a link's
// token is only taken out of the address.
func TestLinkOpenHost(t *testing.T) {
	e := newEnv(t, envOptions{open: true})
	b := e.browser()
	if r := b.get("/ui/?tkn=whatever"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/" {
		t.Fatalf("%d %q", r.status, r.header.Get("Location"))
	}
}

// TestSignOutEverywhere checks that signing out everywhere ends every
// login of the person and nobody else's, and needs the form's CSRF token.
func TestSignOutEverywhere(t *testing.T) {
	e := newEnv(t, envOptions{})
	mo1, mo2, mo3, gus := e.signIn("mo"), e.signIn("mo"), e.signIn("mo"), e.signIn("gus")
	if r := mo1.get("/ui/"); !strings.Contains(r.body, `action="/ui/logout/all"`) {
		t.Fatalf("no sign out everywhere: %s", r.body)
	}
	if r := mo1.post("/ui/logout/all", url.Values{"csrf": {"wrong"}}); r.status != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", r.status)
	}
	if r := mo2.get("/ui/"); r.status != http.StatusOK {
		t.Fatalf("a refused sign-out signed out: %d", r.status)
	}
	if r := mo1.post("/ui/logout/all", url.Values{"csrf": {mo1.csrf()}}); r.status != http.StatusSeeOther {
		t.Fatalf("signing out everywhere: %d %s", r.status, r.body)
	}
	for i, b := range []*browser{mo1, mo2, mo3} {
		if r := b.get("/ui/"); r.status != http.StatusUnauthorized || !strings.Contains(r.body, `id="token"`) {
			t.Errorf("mo's login %d after signing out everywhere: %d", i+1, r.status)
		}
	}
	if r := gus.get("/ui/"); r.status != http.StatusOK {
		t.Errorf("gus was signed out too: %d", r.status)
	}
	if r := mo1.post("/ui/logout/all", url.Values{"csrf": {"x"}}); r.status != http.StatusUnauthorized {
		t.Errorf("signing out everywhere, signed out: %d", r.status)
	}
}
