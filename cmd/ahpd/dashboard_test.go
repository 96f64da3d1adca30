package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestDashboardMounted checks that the daemon serves the dashboard at
// /ui/ on its listener, behind its connection token.
func TestDashboardMounted(t *testing.T) {
	e := newEnv(t)
	p := serveDaemon(t, e)
	base := "http://" + p.addr
	p.waitStderr("ahpd: the dashboard is at "+base+"/ui/\n", startTimeout)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /ui/ without signing in: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	resp, err = hc.PostForm(base+"/ui/login", url.Values{"token": {e.token(t)}, "next": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" {
		t.Fatalf("signing in with the connection token: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	resp, err = hc.Get(base + "/ui/static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the style sheet: %d", resp.StatusCode)
	}
}
