package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOpenHostRefusesCrossSite: a host that asks no token serves what a
// person or a script sends (no Sec-Fetch-Site, "none"), and its own
// pages ("same-origin", its own Origin), and nothing a page of another
// origin sent, by Sec-Fetch-Site or by Origin: 403 cross_origin, GETs
// and event streams among them, and nothing done.
func TestOpenHostRefusesCrossSite(t *testing.T) {
	srv := httptest.NewServer(newOpenAPI(t))
	t.Cleanup(srv.Close)
	self := srv.URL // http://127.0.0.1:PORT: the host's own origin
	do := func(method, path, body string, header map[string]string) (int, map[string]any) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, out
	}
	tests := []struct {
		name   string
		method string
		path   string
		header map[string]string
		want   int
		code   string // the error's, for a refusal
	}{
		{"curl", "GET", "/v1/sessions", nil, 200, ""},
		{"a typed URL", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "none"}, 200, ""},
		{"its own page", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"its own page's fetch", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}, 200, ""},
		{"its own Origin alone", "GET", "/v1/sessions", map[string]string{"Origin": self}, 200, ""},
		{"another site's page", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"another site's event stream", "GET", "/v1/automations/events", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"another port's page", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "cross_origin"},
		{"a value no browser sends", "GET", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "Same-Origin"}, 403, "cross_origin"},
		{"another origin", "GET", "/v1/sessions", map[string]string{"Origin": "http://evil.example"}, 403, "cross_origin"},
		{"another port on localhost", "GET", "/v1/sessions", map[string]string{"Origin": "http://localhost:3000"}, 403, "cross_origin"},
		{"an opaque origin", "GET", "/v1/sessions", map[string]string{"Origin": "null"}, 403, "cross_origin"},
		{"a sandboxed frame", "GET", "/v1/sessions", map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"its own no-referrer page", "GET", "/v1/sessions", map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"its own Origin, another site's fetch", "GET", "/v1/sessions", map[string]string{"Origin": self, "Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"its own page's POST", "POST", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self, "Content-Type": "application/json"}, 201, ""},
		{"another site's POST", "POST", "/v1/sessions", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, 403, "cross_origin"},
		{"another origin's POST", "POST", "/v1/sessions", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403, "cross_origin"},
		{"a rebound name", "GET", "/v1/sessions", map[string]string{"Host": "evil.example"}, 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = `{"provider": "script", "title": "from a page"}`
			}
			code, out := do(tt.method, tt.path, body, tt.header)
			if code != tt.want {
				t.Fatalf("%d %v, want %d", code, out, tt.want)
			}
			if tt.code == "" {
				return
			}
			errObj, _ := out["error"].(map[string]any)
			if errObj["code"] != tt.code || errObj["message"] == "" {
				t.Errorf("the refusal %v, want code %s", out, tt.code)
			}
		})
	}
	// Of the POSTs, only its own page's made a session.
	if _, out := do("GET", "/v1/sessions", "", nil); len(out["sessions"].([]any)) != 1 {
		t.Errorf("sessions %v, want the one its own page made", out["sessions"])
	}
}

// TestTokenHostTakesCrossSite: on a host that asks a token the token is
// what a request is judged by: a page cannot make a browser send one, so
// Sec-Fetch-Site and Origin are not looked at.
func TestTokenHostTakesCrossSite(t *testing.T) {
	e := newEnv(t)
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}},
		{"Origin": {"http://evil.example"}},
	} {
		if code, _, out := e.callWith(h, "mo", "GET", "/v1/sessions", nil); code != 200 {
			t.Errorf("%v with a token: %d %v", h, code, out)
		}
	}
	if code, _, out := e.callWith(http.Header{"Sec-Fetch-Site": {"cross-site"}}, "", "GET", "/v1/sessions", nil); code != http.StatusUnauthorized {
		t.Errorf("cross-site without a token: %d %v, want 401", code, out)
	}
}
