package dashboard_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
)

// TestSignIn follows a browser from the sign-in page through a session
// cookie to signing out.
func TestSignIn(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser()
	r := b.get("/ui/")
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, `name="token"`) {
		t.Fatalf("GET /ui/ without a cookie: %d, want the sign-in page: %s", r.status, r.body)
	}
	if strings.Contains(r.body, "<table") {
		t.Fatal("the sign-in page shows the sessions table")
	}
	r = b.post("/ui/login", url.Values{"token": {"wrong"}})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "not one this host accepts") {
		t.Fatalf("a wrong token: %d %s", r.status, r.body)
	}
	if len(b.hc.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/"))) != 0 {
		t.Fatal("a wrong token set a cookie")
	}
	r = b.post("/ui/login", url.Values{"token": {e.tokens["mo"]}, "next": {"/ui/?status=idle"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/?status=idle" {
		t.Fatalf("signing in: %d to %q", r.status, r.header.Get("Location"))
	}
	set := r.header.Get("Set-Cookie")
	for _, want := range []string{"ahpd_ui=", "Path=/ui/", "HttpOnly", "SameSite=Strict", "Expires="} {
		if !strings.Contains(set, want) {
			t.Errorf("the cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(set, "Secure") || strings.Contains(set, e.tokens["mo"]) {
		t.Errorf("the cookie %q is Secure over plain HTTP, or carries the token", set)
	}
	r = b.get("/ui/")
	if r.status != http.StatusOK || !strings.Contains(r.body, "user:mo") || !strings.Contains(r.body, `<table class="sessions"`) {
		t.Fatalf("signed in, GET /ui/: %d %s", r.status, r.body)
	}
	// Signing out needs the form's CSRF token.
	csrf := b.csrf()
	if r = b.post("/ui/logout", url.Values{"csrf": {"x" + csrf[1:]}}); r.status != http.StatusForbidden {
		t.Fatalf("signing out with a wrong CSRF token: %d", r.status)
	}
	if r = b.post("/ui/logout", url.Values{"csrf": {csrf}}); r.status != http.StatusSeeOther {
		t.Fatalf("signing out: %d %s", r.status, r.body)
	}
	if r = b.get("/ui/"); r.status != http.StatusUnauthorized {
		t.Fatalf("after signing out, GET /ui/: %d", r.status)
	}
}

// TestNothingWithoutSignIn checks that no page, stream or write is served
// to a browser that has not signed in, or whose cookie is not a login.
func TestNothingWithoutSignIn(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser()
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/", http.StatusUnauthorized},
		{"GET", "/ui/session?uri=ahp-session:/x", http.StatusUnauthorized},
		{"GET", "/ui/automations", http.StatusUnauthorized},
		{"GET", "/ui/nope", http.StatusUnauthorized},
		{"GET", "/ui/events", http.StatusUnauthorized},
		{"GET", "/ui/session/events?uri=ahp-session:/x", http.StatusUnauthorized},
		{"POST", "/ui/session/action", http.StatusUnauthorized},
		{"POST", "/ui/logout", http.StatusUnauthorized},
	} {
		var r response
		if tc.method == "GET" {
			r = b.get(tc.path)
		} else {
			r = b.post(tc.path, url.Values{"op": {"cancel"}, "uri": {"ahp-session:/x"}})
		}
		if r.status != tc.want || strings.Contains(r.body, "<table") || strings.Contains(r.body, "event:") {
			t.Errorf("%s %s: %d, want %d: %.200s", tc.method, tc.path, r.status, tc.want, r.body)
		}
	}
	// A made-up cookie is nobody's login.
	b.hc.Jar.SetCookies(mustURL(t, e.srv.URL+"/ui/"), []*http.Cookie{{Name: "ahpd_ui", Value: "forged", Path: "/ui/"}})
	if r := b.get("/ui/"); r.status != http.StatusUnauthorized {
		t.Fatalf("a forged cookie: %d", r.status)
	}
	// The style sheet and script are no secret.
	if r := b.get("/ui/static/app.js"); r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Type"), "javascript") {
		t.Fatalf("the script: %d %s", r.status, r.header.Get("Content-Type"))
	}
}

// TestSecurityHeaders checks the headers of every kind of answer.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("mo")
	for _, path := range []string{"/ui/", "/ui/automations", "/ui/static/app.css", "/ui/session?uri=ahp-session:/none", "/ui/?status=bogus"} {
		r := b.get(path)
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: the CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: the CSP %q allows inline script or eval", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") && (strings.Contains(r.body, "<script>") || strings.Contains(r.body, " style=")) {
			t.Errorf("%s: the page has inline script or style", path)
		}
	}
}

// TestOtherSitesRefused checks that a form posted from another origin, and
// on an open host a request naming another host, are refused.
func TestOtherSitesRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.signIn("mo")
	csrf := b.csrf()
	req, _ := http.NewRequest("POST", e.srv.URL+"/ui/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	if r := b.do(req); r.status != http.StatusForbidden {
		t.Fatalf("a POST from another origin: %d", r.status)
	}
	if r := b.get("/ui/"); r.status != http.StatusOK {
		t.Fatalf("the refused POST signed the browser out: %d", r.status)
	}
	// A token too long is refused without being checked.
	if r := e.browser().post("/ui/login", url.Values{"token": {strings.Repeat("a", 5000)}}); r.status != http.StatusUnauthorized {
		t.Fatalf("a huge token: %d", r.status)
	}
	if r := e.browser().post("/ui/login", url.Values{"token": {strings.Repeat("a", 20000)}}); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a huge form: %d", r.status)
	}
}

// TestOpenHost checks a host with no token: no sign-in, but still a
// login behind a cookie for the CSRF token, and only loopback names.
func TestOpenHost(t *testing.T) {
	e := newEnv(t, envOptions{open: true})
	b := e.browser()
	r := b.get("/ui/")
	if r.status != http.StatusOK || !strings.Contains(r.body, `<table class="sessions"`) || strings.Contains(r.body, "Sign out") {
		t.Fatalf("an open host's GET /ui/: %d %s", r.status, r.body)
	}
	if !strings.Contains(r.header.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("no login cookie: %q", r.header.Get("Set-Cookie"))
	}
	// Every browser is the host's one person: more browsers than a
	// person's budget take no browser's login, and its forms' token, away.
	for range 21 {
		e.browser().get("/ui/")
	}
	if r := b.get("/ui/"); r.status != http.StatusOK || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("other browsers on an open host took a browser's login: %d, a new cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/ui/", nil)
	req.Host = "evil.example"
	if r := b.do(req); r.status != http.StatusForbidden {
		t.Fatalf("an open host named evil.example: %d", r.status)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSignInBudgets signs people in, each time from a new browser, and
// checks that each keeps exactly their newest logins: a person signing
// in past their budget signs out only their own oldest browser, and never
// anyone else, however many times they sign in.
func TestSignInBudgets(t *testing.T) {
	type signIns struct {
		who string
		n   int
	}
	for _, tc := range []struct {
		name string
		o    envOptions
		in   []signIns
		kept map[string]int // how many of each person's newest browsers are signed in
	}{{
		name: "a guest's 1,001 sign-ins leave the others signed in",
		in:   []signIns{{"root", 1}, {"mo", 1}, {"gus", 1001}},
		kept: map[string]int{"root": 1, "mo": 1, "gus": 20},
	}, {
		name: "a person's 21st login signs out their own oldest",
		in:   []signIns{{"mo", 1}, {"gus", 1}, {"mo", 20}},
		kept: map[string]int{"mo": 20, "gus": 1},
	}, {
		name: "the budget is an option",
		o:    envOptions{loginsPerPerson: 3},
		in:   []signIns{{"gus", 1}, {"mo", 5}},
		kept: map[string]int{"mo": 3, "gus": 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.o)
			browsers := map[string][]*browser{}
			for _, s := range tc.in {
				for range s.n {
					browsers[s.who] = append(browsers[s.who], e.signIn(s.who))
				}
			}
			for who, bs := range browsers {
				for i, b := range bs {
					want := http.StatusUnauthorized
					if i >= len(bs)-tc.kept[who] {
						want = http.StatusOK
					}
					if r := b.get("/ui/"); r.status != want {
						t.Fatalf("%s's browser %d of %d: GET /ui/ %d, want %d", who, i+1, len(bs), r.status, want)
					}
				}
			}
		})
	}
}

// TestSignInRefusedWhenFullOfOthers checks that a table full of other
// people's logins refuses a sign-in, with 429, a Retry-After of when the
// first of them ends and a page saying so, signs nobody out, and lets
// the sign-in in once a login expired.
func TestSignInRefusedWhenFullOfOthers(t *testing.T) {
	// Near the real time: the cookie jar drops a cookie whose Expires,
	// read from this clock, has passed.
	c := clock.NewFake(time.Now())
	e := newEnv(t, envOptions{maxLogins: 3, loginsPerPerson: 2, now: c.Now})
	var in []*browser
	for _, who := range []string{"mo", "mo", "root"} {
		in = append(in, e.signIn(who))
		c.Advance(time.Minute)
	}
	gus := e.browser()
	r := gus.post("/ui/login", url.Values{"token": {e.tokens["gus"]}, "next": {"/ui/automations"}})
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("signing in to a table full of other people's: %d %s", r.status, r.body)
	}
	if got, want := r.header.Get("Retry-After"), strconv.Itoa(int((12*time.Hour - 3*time.Minute).Seconds())); got != want {
		t.Errorf("Retry-After %q, want %q: when mo's first login ends", got, want)
	}
	for _, want := range []string{"at most 3 dashboard sign-ins", "other people", "within 12 hours", `name="token"`, `value="/ui/automations"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the refusal's page lacks %q: %s", want, r.body)
		}
	}
	if r.header.Get("Set-Cookie") != "" {
		t.Errorf("a refused sign-in set a cookie: %q", r.header.Get("Set-Cookie"))
	}
	for i, b := range in {
		if r := b.get("/ui/"); r.status != http.StatusOK {
			t.Fatalf("%s's browser %d after the refusal: %d", b.who, i, r.status)
		}
	}
	c.Advance(12*time.Hour - 3*time.Minute)
	e.signIn("gus")
	for i, want := range []int{http.StatusUnauthorized, http.StatusOK, http.StatusOK} {
		if r := in[i].get("/ui/"); r.status != want {
			t.Fatalf("%s's browser %d once its first login expired: %d, want %d", in[i].who, i, r.status, want)
		}
	}
}
