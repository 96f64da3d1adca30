package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
)

// TestIdempotencyKey: a POST under a key is done once per person and
// request; what differs (another body, another person, a key expired, an
// answer not to keep) is served again or refused, as the table says.
func TestIdempotencyKey(t *testing.T) {
	mo, gus := grants.UserPrincipal("mo"), grants.UserPrincipal("gus")
	type send struct {
		who    grants.Principal
		key    string
		body   string
		after  time.Duration // the clock moved on before it
		status int           // the answer wanted
		served bool          // the handler ran for it
	}
	cases := []struct {
		name   string
		answer int // what the handler answers
		sends  []send
	}{
		{"sent again", 201, []send{
			{mo, "k1", `{"a":1}`, 0, 201, true},
			{mo, "k1", `{"a":1}`, 0, 201, false},
			{mo, "k1", `{"a":1}`, time.Hour, 201, false},
		}},
		{"another request under the key", 201, []send{
			{mo, "k1", `{"a":1}`, 0, 201, true},
			{mo, "k1", `{"a":2}`, 0, 422, false},
		}},
		{"keys are each person's", 201, []send{
			{mo, "k1", `{"a":1}`, 0, 201, true},
			{gus, "k1", `{"a":1}`, 0, 201, true},
		}},
		{"expired", 201, []send{
			{mo, "k1", `{"a":1}`, 0, 201, true},
			{mo, "k1", `{"a":1}`, keyTTL, 201, true},
		}},
		{"a 5xx is not kept", 503, []send{
			{mo, "k1", `{}`, 0, 503, true},
			{mo, "k1", `{}`, 0, 503, true},
		}},
		{"a 4xx is", 404, []send{
			{mo, "k1", `{}`, 0, 404, true},
			{mo, "k1", `{}`, 0, 404, false},
		}},
		{"no key", 201, []send{
			{mo, "", `{}`, 0, 201, true},
			{mo, "", `{}`, 0, 201, true},
		}},
		{"a bad key", 201, []send{
			{mo, "with space", `{}`, 0, 400, false},
			{mo, strings.Repeat("k", maxKeyLen+1), `{}`, 0, 400, false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
			k := newKeys(clk.Now, nil, nil)
			var served atomic.Int64
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := served.Add(1)
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.answer)
				fmt.Fprintf(w, `{"n":%d,"got":%q}`, n, body)
			})
			var first string
			for i, s := range tc.sends {
				clk.Advance(s.after)
				before := served.Load()
				req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(s.body))
				if s.key != "" {
					req.Header.Set("Idempotency-Key", s.key)
				}
				rec := httptest.NewRecorder()
				k.idempotent(rec, req, s.who, next)
				if rec.Code != s.status {
					t.Fatalf("send %d: status %d, want %d: %s", i, rec.Code, s.status, rec.Body)
				}
				if ran := served.Load() > before; ran != s.served {
					t.Fatalf("send %d: served %v, want %v", i, ran, s.served)
				}
				replayed := rec.Header().Get("Idempotent-Replayed") == "true"
				if replayed != (!s.served && s.status == tc.answer) {
					t.Errorf("send %d: Idempotent-Replayed is %v", i, replayed)
				}
				if i == 0 {
					first = rec.Body.String()
				} else if replayed && rec.Body.String() != first {
					t.Errorf("send %d answered %s, want the first answer %s", i, rec.Body, first)
				}
			}
		})
	}
}

// TestIdempotencyKeyInFlight: a request sent again while the first is
// still being answered is 409, and served by nobody.
func TestIdempotencyKeyInFlight(t *testing.T) {
	k := newKeys(nil, nil, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.WriteHeader(201)
	})
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k")
		rec := httptest.NewRecorder()
		k.idempotent(rec, req, grants.UserPrincipal("mo"), next)
		return rec
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post() }()
	<-entered
	if rec := post(); rec.Code != http.StatusConflict {
		t.Errorf("sent again in flight: %d, want 409", rec.Code)
	}
	close(release)
	if rec := <-done; rec.Code != 201 {
		t.Errorf("the first: %d", rec.Code)
	}
	if rec := post(); rec.Code != 201 || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("sent again once answered: %d, replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
}

// TestIdempotencyKeyBounds: the answers kept stay within their count and
// bytes, the oldest going first; one too large to keep is answered 409
// when sent again, not served twice.
func TestIdempotencyKeyBounds(t *testing.T) {
	k := newKeys(nil, nil, nil)
	big := strings.Repeat("x", maxKeptBody/2+1)
	var served atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Path == "/huge" {
			_, _ = io.WriteString(w, big)
		}
		_, _ = io.WriteString(w, big)
	})
	post := func(path, key string) int {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		k.idempotent(rec, req, grants.UserPrincipal("mo"), next)
		return rec.Code
	}
	n := maxKeptBytes/(len(big)) + 10
	for i := range n {
		post("/", fmt.Sprint("k", i))
	}
	k.mu.Lock()
	kept, bytes := len(k.byID), k.bytes
	k.mu.Unlock()
	if bytes > maxKeptBytes || kept >= n {
		t.Errorf("kept %d answers of %d bytes, the bound is %d bytes", kept, bytes, maxKeptBytes)
	}
	before := served.Load()
	if post("/", fmt.Sprint("k", n-1)) != 200 || served.Load() != before {
		t.Error("the newest answer was not kept")
	}
	if post("/", "k0"); served.Load() != before+1 {
		t.Error("the oldest answer was kept past the bound")
	}
	post("/huge", "huge")
	if code := post("/huge", "huge"); code != http.StatusConflict || served.Load() != before+2 {
		t.Errorf("a request with an answer too large to keep, sent again: %d, served %d times", code, served.Load()-before-1)
	}
}
