package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/journal"
)

// keptHarness serves POSTs under Idempotency-Keys as a host would with
// its answers in a journal, and restarts: a host's memory (keys) anew, or
// the journal too.
type keptHarness struct {
	t      *testing.T
	dir    string
	clk    *clock.Fake
	j      *journal.Journal
	k      *keys
	served atomic.Int64
	next   http.Handler
}

func newKeptHarness(t *testing.T) *keptHarness {
	h := &keptHarness{t: t, dir: filepath.Join(t.TempDir(), "journal"),
		clk: clock.NewFake(time.Date(2026, 12, 3, 23, 30, 0, 0, time.UTC))}
	h.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.served.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/v1/sessions/s%d", n))
		w.WriteHeader(http.StatusCreated)
		if r.URL.Path == "/huge" {
			_, _ = io.WriteString(w, strings.Repeat("x", maxKeptBody+1))
			return
		}
		fmt.Fprintf(w, `{"n":%d,"got":%q}`, n, body)
	})
	h.openJournal()
	t.Cleanup(func() { h.closeJournal() })
	return h
}

func (h *keptHarness) openJournal() {
	j, err := journal.Open(context.Background(), journal.Config{Dir: h.dir})
	if err != nil {
		h.t.Fatal(err)
	}
	h.j = j
	h.k = newKeys(h.clk.Now, j, nil)
}

func (h *keptHarness) closeJournal() {
	if h.j != nil {
		if err := h.j.Close(context.Background()); err != nil {
			h.t.Error(err)
		}
		h.j = nil
	}
}

// restart forgets what the host had in memory; journal says the journal
// is closed and opened again too.
func (h *keptHarness) restart(journal bool) {
	if journal {
		h.closeJournal()
		h.openJournal()
		return
	}
	h.k = newKeys(h.clk.Now, h.j, nil)
}

func (h *keptHarness) post(who grants.Principal, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.k.idempotent(rec, req, who, h.next)
	return rec
}

// TestIdempotencyKeyKept: with the journal keeping the answers, a host
// restarted (its memory anew, or the journal's server too), or another
// host on the same journal, answers a key as the first answer was, head
// and body; the same key with another request is still 422, another
// person's is theirs, and a key past keyTTL is served anew. An answer too
// large to keep is 409 after a restart, not served again.
func TestIdempotencyKeyKept(t *testing.T) {
	h := newKeptHarness(t)
	mo, gus := grants.UserPrincipal("mo"), grants.UserPrincipal("gus")
	first := h.post(mo, "/v1/sessions", "k1", `{"a":1}`)
	if first.Code != http.StatusCreated || h.served.Load() != 1 {
		t.Fatalf("first: %d, served %d", first.Code, h.served.Load())
	}
	huge := h.post(mo, "/huge", "k2", `{}`)
	if huge.Code != http.StatusCreated || huge.Body.Len() != maxKeptBody+1 {
		t.Fatalf("a huge answer: %d, %d bytes", huge.Code, huge.Body.Len())
	}

	for _, journalToo := range []bool{false, true} {
		h.restart(journalToo)
		again := h.post(mo, "/v1/sessions", "k1", `{"a":1}`)
		if again.Code != first.Code || again.Body.String() != first.Body.String() ||
			again.Header().Get("Location") != first.Header().Get("Location") || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after a restart (journal too: %v): %d %q at %q, want %d %q at %q, replayed",
				journalToo, again.Code, again.Body, again.Header().Get("Location"), first.Code, first.Body, first.Header().Get("Location"))
		}
		if rec := h.post(mo, "/v1/sessions", "k1", `{"a":2}`); rec.Code != http.StatusUnprocessableEntity {
			t.Errorf("another request under the key after a restart: %d, want 422", rec.Code)
		}
		if rec := h.post(mo, "/huge", "k2", `{}`); rec.Code != http.StatusConflict {
			t.Errorf("an answer too large to keep, sent again after a restart: %d, want 409", rec.Code)
		}
		if h.served.Load() != 2 {
			t.Fatalf("served %d times, want 2", h.served.Load())
		}
	}
	if rec := h.post(gus, "/v1/sessions", "k1", `{"a":1}`); rec.Code != http.StatusCreated || h.served.Load() != 3 {
		t.Errorf("another person's key: %d, served %d", rec.Code, h.served.Load())
	}

	// Past midnight (the answer is read from yesterday's set), then past
	// keyTTL.
	h.clk.Advance(2 * time.Hour)
	h.restart(false)
	if rec := h.post(mo, "/v1/sessions", "k1", `{"a":1}`); rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the next day: %d, replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
	h.clk.Advance(keyTTL)
	h.restart(false)
	if rec := h.post(mo, "/v1/sessions", "k1", `{"a":1}`); rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") == "true" || h.served.Load() != 4 {
		t.Errorf("past keyTTL: %d, replayed %q, served %d", rec.Code, rec.Header().Get("Idempotent-Replayed"), h.served.Load())
	}
}

// TestKeptAnswersSwept: the first answer kept on a day drops the sets of
// the days past keeping, and only those.
func TestKeptAnswersSwept(t *testing.T) {
	h := newKeptHarness(t)
	ctx := context.Background()
	h.post(grants.UserPrincipal("mo"), "/v1/sessions", "k1", `{}`)
	day1 := answerSet(h.clk.Now())
	h.clk.Advance(24 * time.Hour)
	h.post(grants.UserPrincipal("mo"), "/v1/sessions", "k2", `{}`)
	count := func(set string) int {
		notes, err := h.j.Notes(ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		return len(notes)
	}
	if count(day1) != 1 {
		t.Fatalf("yesterday's answers were dropped a day on")
	}
	day2 := answerSet(h.clk.Now())
	h.clk.Advance(24 * time.Hour)
	h.restart(false)
	h.post(grants.UserPrincipal("mo"), "/v1/sessions", "k3", `{}`)
	if n := count(day1); n != 0 {
		t.Errorf("%d answers kept two days ago were not dropped", n)
	}
	if n := count(day2); n != 1 {
		t.Errorf("the answers of yesterday: %d, want 1", n)
	}
}
