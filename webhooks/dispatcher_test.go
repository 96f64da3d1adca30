package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait bounds every wait of these tests on something the code under test
// does: never reached by a test that passes, it turns a hang into a
// failure that says what was awaited.
const wait = testwait.Hang

var secret = []byte("0123456789abcdef0123456789abcdef")

// received is one request a receiver took.
type received struct {
	n      int // 1 for the first request the receiver took
	header http.Header
	raw    []byte
	body   Body
	// verified is Verify's verdict under the receiver's secret, by the
	// dispatcher's clock.
	verified error
}

// receiver is a webhook receiver on 127.0.0.1. answer says how it
// answers its request n (from 1); nil answers 204.
type receiver struct {
	srv    *httptest.Server
	got    chan received
	mu     sync.Mutex
	n      int
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newReceiver(t *testing.T, now func() time.Time, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 1000), answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.n++
		n := rc.n
		rc.mu.Unlock()
		got := received{n: n, header: r.Header.Clone(), raw: raw, verified: Verify(secret, r.Header, raw, now(), 0)}
		if err := json.Unmarshal(raw, &got.body); err != nil {
			t.Errorf("request %d: the body is no JSON: %v: %s", n, err, raw)
		}
		rc.got <- got
		if rc.answer != nil {
			rc.answer(w, r, n)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next returns the next request the receiver took.
func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(wait):
		t.Fatal("the receiver took no request")
		return received{}
	}
}

// harness is a dispatcher on a fake clock, and the attempts it made.
type harness struct {
	d        *Dispatcher
	clock    *clock.Fake
	attempts chan Entry
}

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newHarness(t *testing.T, fake *clock.Fake, opts Options) *harness {
	t.Helper()
	if fake == nil {
		fake = clock.NewFake(epoch)
	}
	h := &harness{clock: fake, attempts: make(chan Entry, 1000)}
	opts.Clock = fake
	opts.attempted = func(e Entry) { h.attempts <- e }
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	t.Cleanup(func() { h.close(t) })
	return h
}

func (h *harness) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := h.d.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// attempt returns the outcome of the next attempt that ends.
func (h *harness) attempt(t *testing.T) Entry {
	t.Helper()
	select {
	case e := <-h.attempts:
		return e
	case <-time.After(wait):
		t.Fatal("no attempt ended")
		return Entry{}
	}
}

// advanceTo moves the clock on to at.
func (h *harness) advanceTo(at time.Time) {
	if d := at.Sub(h.clock.Now()); d > 0 {
		h.clock.Advance(d)
	}
}

func webhook(t *testing.T, url string, kinds ...events.Kind) Webhook {
	t.Helper()
	if len(kinds) == 0 {
		kinds = events.Kinds()
	}
	var names []string
	for _, k := range kinds {
		names = append(names, string(k))
	}
	ws, err := Check([]Spec{{Name: "rx", URL: url, Events: names, Secret: string(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	return ws[0]
}

func turnEnded(session string, n int) events.Event {
	return events.Event{
		Kind: events.TurnCompleted, Time: epoch,
		Session: events.Session{URI: "ahp-session:/" + session, ID: session, Title: "Fix the build", Provider: "script"},
		Chat:    "ahp-chat:/" + session + "/default",
		Turn:    &events.Turn{ID: fmt.Sprintf("t%d", n), State: protocol.TurnStateComplete, Duration: 1500 * time.Millisecond},
	}
}

// TestDeliveryIsSigned: a delivery carries its event, id, attempt and
// timestamp, its body says what happened, and its signature verifies
// under the webhook's secret only, for that body and timestamp only.
func TestDeliveryIsSigned(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, nil)
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL)}, UserAgent: "ahpd/test"})
	h.d.Event(turnEnded("s1", 1))
	got := rc.next(t)
	if got.verified != nil {
		t.Fatalf("Verify under the webhook's secret: %v", got.verified)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "ahpd/test", HeaderEvent: "turn_completed", HeaderAttempt: "1",
		HeaderTimestamp: fmt.Sprint(epoch.Unix()), HeaderDelivery: got.body.ID,
	} {
		if v := got.header.Get(k); v != want {
			t.Errorf("%s: %q, want %q", k, v, want)
		}
	}
	if !strings.HasPrefix(got.body.ID, "evt_") || got.body.Event != events.TurnCompleted || got.body.Time != "2026-03-04T05:06:07.000Z" {
		t.Errorf("body: %s", got.raw)
	}
	if s := got.body.Session; s == nil || s.URI != "ahp-session:/s1" || s.ID != "s1" || s.Title != "Fix the build" {
		t.Errorf("session: %s", got.raw)
	}
	if tu := got.body.Turn; tu == nil || tu.ID != "t1" || tu.State != "complete" || tu.DurationMs == nil || *tu.DurationMs != 1500 {
		t.Errorf("turn: %s", got.raw)
	}
	if want := "sha256=" + hmacHex(secret, fmt.Sprint(epoch.Unix())+"."+string(got.raw)); got.header.Get(HeaderSignature) != want {
		t.Errorf("signature %q, want %q: HMAC-SHA256 of the timestamp, a dot and the body", got.header.Get(HeaderSignature), want)
	}

	if err := Verify([]byte("another secret, just as long as it"), got.header, got.raw, fake.Now(), 0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify under another secret: %v, want ErrBadSignature", err)
	}
	changed := bytes.Replace(got.raw, []byte("Fix the build"), []byte("Fix the bills"), 1)
	if err := Verify(secret, got.header, changed, fake.Now(), 0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify of a changed body: %v, want ErrBadSignature", err)
	}
	replayed := got.header.Clone()
	replayed.Set(HeaderTimestamp, fmt.Sprint(fake.Now().Add(time.Hour).Unix()))
	if err := Verify(secret, replayed, got.raw, fake.Now().Add(time.Hour), 0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify with a newer timestamp than was signed: %v, want ErrBadSignature", err)
	}
	if err := Verify(secret, got.header, got.raw, fake.Now().Add(6*time.Minute), 0); !errors.Is(err, ErrStale) {
		t.Errorf("Verify six minutes later: %v, want ErrStale", err)
	}
	unsigned := got.header.Clone()
	unsigned.Del(HeaderSignature)
	if err := Verify(secret, unsigned, got.raw, fake.Now(), 0); !errors.Is(err, ErrNoSignature) {
		t.Errorf("Verify without a signature: %v, want ErrNoSignature", err)
	}
	if e := h.attempt(t); e.Status != StatusDelivered || e.Attempts != 1 || e.Code != http.StatusNoContent {
		t.Errorf("the log says %+v", e)
	}
}

// TestRetriesKeepTheID: a delivery answered 500, or whose connection is
// dropped, or that gets no answer within the timeout, is tried again
// after a backoff, with the same id and body and a fresh timestamp and
// signature, until it is delivered.
func TestRetriesKeepTheID(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			http.Error(w, "try later", http.StatusInternalServerError)
		case 2:
			// The connection drops before any answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		case 3:
			<-r.Context().Done() // no answer, until the sender gives up
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL)}})
	h.d.Event(turnEnded("s1", 1))

	first := rc.next(t)
	bodies := [][]byte{first.raw}
	retried := func(n int, why func(Entry) bool) Entry {
		t.Helper()
		e := h.attempt(t)
		if e.Status != StatusRetrying || e.Attempts != n || !why(e) {
			t.Fatalf("attempt %d: %+v, want retrying", n, e)
		}
		return e
	}
	e := retried(1, func(e Entry) bool { return e.Code == 500 && e.Error == "HTTP 500: try later" })
	for _, e := range []Entry{e} {
		if lo, hi := backoffRange(1); e.Next.Sub(e.LastAttempt) < lo || e.Next.Sub(e.LastAttempt) > hi {
			t.Errorf("after attempt 1 the next in %v, want %v to %v", e.Next.Sub(e.LastAttempt), lo, hi)
		}
	}
	h.advanceTo(e.Next)
	bodies = append(bodies, rc.next(t).raw)
	e = retried(2, func(e Entry) bool { return e.Code == 0 && e.Error != "" }) // the connection dropped
	if lo, hi := backoffRange(2); e.Next.Sub(e.LastAttempt) < lo || e.Next.Sub(e.LastAttempt) > hi {
		t.Errorf("after attempt 2 the next in %v, want %v to %v", e.Next.Sub(e.LastAttempt), lo, hi)
	}
	h.advanceTo(e.Next)
	bodies = append(bodies, rc.next(t).raw)
	fake.Advance(DefaultTimeout) // the third waits: its timeout runs on the dispatcher's clock
	e = retried(3, func(e Entry) bool { return e.Code == 0 && e.Error == "no answer within 10s" })
	h.advanceTo(e.Next)
	last := rc.next(t)
	if e := h.attempt(t); e.Status != StatusDelivered || e.Attempts != 4 || e.Error != "" {
		t.Errorf("the last attempt: %+v", e)
	}
	if last.header.Get(HeaderDelivery) != first.header.Get(HeaderDelivery) || last.header.Get(HeaderAttempt) != "4" {
		t.Errorf("the fourth attempt: id %q attempt %q; the first's id %q", last.header.Get(HeaderDelivery), last.header.Get(HeaderAttempt), first.header.Get(HeaderDelivery))
	}
	if last.verified != nil || last.header.Get(HeaderTimestamp) == first.header.Get(HeaderTimestamp) {
		t.Errorf("the fourth attempt: verified %v, timestamp %s (the first's %s)", last.verified, last.header.Get(HeaderTimestamp), first.header.Get(HeaderTimestamp))
	}
	for i, b := range append(bodies, last.raw) {
		if !bytes.Equal(b, first.raw) {
			t.Errorf("attempt %d's body differs from the first's:\n%s\n%s", i+1, b, first.raw)
		}
	}
	if got := value(h.d.m.attempts.WithLabelValues("rx", "failed")); got != 3 {
		t.Errorf("ahpd_webhook_attempts_total{result=failed} = %v, want 3", got)
	}
}

// backoffRange is what backoff draws from after attempt n.
func backoffRange(n int) (time.Duration, time.Duration) {
	d := min(baseBackoff<<(n-1), maxBackoff)
	return d / 2, d
}

// TestGivesUpAfterTheHour: a receiver that always fails gets attempts
// for an hour after the event, backing off up to the cap, the last as the
// hour runs out; then the delivery is given up, logged and counted.
func TestGivesUpAfterTheHour(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL)}})
	h.d.Event(turnEnded("s1", 1))
	var e Entry
	var gaps []time.Duration
	for n := 1; ; n++ {
		rc.next(t)
		e = h.attempt(t)
		if e.Status != StatusRetrying {
			break
		}
		if n > 40 {
			t.Fatalf("still retrying after %d attempts: %+v", n, e)
		}
		gaps = append(gaps, e.Next.Sub(e.LastAttempt))
		h.advanceTo(e.Next)
	}
	if e.Status != StatusFailed || !strings.Contains(e.Error, "HTTP 503: down for maintenance") {
		t.Fatalf("the last attempt: %+v, want failed with the receiver's answer", e)
	}
	if span := e.LastAttempt.Sub(epoch); span != DefaultRetryFor {
		t.Errorf("the last attempt was %v after the event, want %v", span, DefaultRetryFor)
	}
	for i, g := range gaps[:len(gaps)-1] { // the last is cut short by the hour
		if lo, hi := backoffRange(i + 1); g < lo || g > hi {
			t.Errorf("gap %d: %v, want %v to %v", i+1, g, lo, hi)
		}
	}
	if len(gaps) < 8 {
		t.Errorf("%d attempts in the hour: %v", len(gaps)+1, gaps)
	}
	if got := value(h.d.m.deliveries.WithLabelValues("rx", StatusFailed)); got != 1 {
		t.Errorf("ahpd_webhook_deliveries_total{result=failed} = %v", got)
	}
	if got := value(h.d.m.waiting.WithLabelValues("rx")); got != 0 {
		t.Errorf("ahpd_webhook_pending = %v after giving up", got)
	}
	// Nothing more is tried.
	fake.Advance(24 * time.Hour)
	log := h.d.Log(0)
	if len(log.Deliveries) != 1 || log.Deliveries[0].Status != StatusFailed || log.Webhooks[0].Failed != 1 || log.Webhooks[0].Pending != 0 {
		t.Errorf("log: %+v", log)
	}
	select {
	case r := <-rc.got:
		t.Errorf("request %d after giving up", r.n)
	default:
	}
}

// TestOrderPerSession: a session's later event waits for its earlier
// one's delivery, retries and all; another session's goes meanwhile.
func TestOrderPerSession(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL)}})
	h.d.Event(turnEnded("a", 1))
	if got := rc.next(t); got.body.Turn.ID != "t1" { // a's first, failing
		t.Fatalf("first request: %s", got.raw)
	}
	failed := h.attempt(t)
	h.d.Event(turnEnded("a", 2))
	h.d.Event(turnEnded("b", 1))
	if got := rc.next(t); got.body.Session.ID != "b" {
		t.Fatalf("while a's first waits to be retried, %s/%s went; want b's", got.body.Session.ID, got.body.Turn.ID)
	}
	if e := h.attempt(t); e.Status != StatusDelivered || e.Session != "ahp-session:/b" {
		t.Fatalf("b's: %+v", e)
	}
	h.advanceTo(failed.Next)
	var order []string
	for range 2 {
		got := rc.next(t)
		order = append(order, got.body.Session.ID+"/"+got.body.Turn.ID)
		h.attempt(t)
	}
	if strings.Join(order, " ") != "a/t1 a/t2" {
		t.Errorf("a's deliveries came %v, want a/t1 then a/t2", order)
	}
}

// TestHungReceiverHoldsNothing: a receiver that never answers holds up
// no caller of Event, and what waits for it is bounded: past MaxPending,
// the oldest waiting is dropped, counted and logged. Once it answers,
// what was kept is delivered, in order.
func TestHungReceiverHoldsNothing(t *testing.T) {
	fake := clock.NewFake(epoch)
	release := make(chan struct{})
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		<-release
		w.WriteHeader(http.StatusOK)
	})
	w := webhook(t, rc.srv.URL)
	w.MaxPending = 3
	h := newHarness(t, fake, Options{Webhooks: []Webhook{w}})
	h.d.Event(turnEnded("s1", 1))
	hung := rc.next(t) // under way, and hung
	for n := 2; n <= 10; n++ {
		h.d.Event(turnEnded("s1", n)) // returns at once: nothing waits for the receiver
	}
	log := h.d.Log(0)
	if st := log.Webhooks[0]; st.Pending != 4 || st.Dropped != 6 {
		t.Errorf("with the receiver hung: %d pending (one under way, MaxPending waiting), %d dropped; want 4 and 6", st.Pending, st.Dropped)
	}
	if got := value(h.d.m.deliveries.WithLabelValues("rx", StatusDropped)); got != 6 {
		t.Errorf("ahpd_webhook_deliveries_total{result=dropped} = %v, want 6", got)
	}
	dropped := 0
	for _, e := range log.Deliveries {
		if e.Status == StatusDropped {
			dropped++
		}
	}
	if dropped != 6 {
		t.Errorf("the log shows %d dropped: %+v", dropped, log.Deliveries)
	}
	close(release)
	order := []string{hung.body.Turn.ID}
	if e := h.attempt(t); e.Status != StatusDelivered {
		t.Errorf("%+v", e)
	}
	for range 3 {
		order = append(order, rc.next(t).body.Turn.ID)
		if e := h.attempt(t); e.Status != StatusDelivered {
			t.Errorf("%+v", e)
		}
	}
	if got := strings.Join(order, " "); got != "t1 t8 t9 t10" {
		t.Errorf("delivered %s, want t1 (under way) and the newest three", got)
	}
}

// TestPendingOutliveRestart: what waits when the dispatcher stops is
// kept in its directory and delivered by the next one, with the same ids,
// in order; a line a crash left half written is skipped; what waited for
// a webhook no longer configured is let go.
func TestPendingOutliveRestart(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(epoch)
	var up sync.Mutex
	down := true
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		up.Lock()
		defer up.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	w := webhook(t, rc.srv.URL)
	h := newHarness(t, fake, Options{Webhooks: []Webhook{w}, Dir: dir})
	h.d.Event(turnEnded("a", 1))
	h.d.Event(turnEnded("a", 2))
	h.d.Event(turnEnded("b", 1))
	ids := map[string]string{}
	for range 2 { // a's first and b's fail; a's second waits behind a's first
		got := rc.next(t)
		ids[got.body.Session.ID+"/"+got.body.Turn.ID] = got.body.ID
		h.attempt(t)
	}
	h.close(t)
	// A crash in the middle of an append leaves half a line.
	f, err := os.OpenFile(filepath.Join(dir, storeFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"op":"add","webhook":"rx","id":"evt_torn","bo`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	up.Lock()
	down = false
	up.Unlock()
	h2 := newHarness(t, fake, Options{Webhooks: []Webhook{w}, Dir: dir})
	var order []string
	for range 3 {
		got := rc.next(t)
		key := got.body.Session.ID + "/" + got.body.Turn.ID
		if id, ok := ids[key]; ok && id != got.body.ID {
			t.Errorf("%s was %s before the restart, %s after", key, id, got.body.ID)
		}
		if got.verified != nil {
			t.Errorf("%s after the restart: %v", key, got.verified)
		}
		if got.body.Session.ID == "a" {
			order = append(order, key)
		}
		if e := h2.attempt(t); e.Status != StatusDelivered {
			t.Errorf("%s: %+v", key, e)
		}
	}
	if strings.Join(order, " ") != "a/t1 a/t2" {
		t.Errorf("a's came %v after the restart", order)
	}
	h2.close(t)
	if data, err := os.ReadFile(filepath.Join(dir, storeFile)); err != nil || countOps(data, "add") != countOps(data, "done") {
		t.Errorf("the file keeps deliveries that were delivered (%v):\n%s", err, data)
	}

	// What waits for a webhook that is gone is let go at the next start.
	up.Lock()
	down = true
	up.Unlock()
	h3 := newHarness(t, fake, Options{Webhooks: []Webhook{w}, Dir: dir})
	h3.d.Event(turnEnded("c", 1))
	rc.next(t)
	h3.attempt(t)
	h3.close(t)
	renamed := w
	renamed.Name = "elsewhere"
	h4 := newHarness(t, fake, Options{Webhooks: []Webhook{renamed}, Dir: dir})
	if log := h4.d.Log(0); log.Webhooks[0].Pending != 0 {
		t.Errorf("a renamed webhook took over another's deliveries: %+v", log)
	}
	h4.close(t)
	if data, _ := os.ReadFile(filepath.Join(dir, storeFile)); len(data) != 0 {
		t.Errorf("the file after a start with nothing to keep:\n%s", data)
	}
}

func countOps(data []byte, op string) int {
	return bytes.Count(data, []byte(`{"op":"`+op+`"`))
}

// TestSecretsAndPathsStayHidden: what the log, errors and metrics show
// of a webhook is its name, scheme and host: never its secret, nor the
// URL's path (where receivers keep tokens).
func TestSecretsAndPathsStayHidden(t *testing.T) {
	fake := clock.NewFake(epoch)
	// Nothing listens there: the attempt fails to connect.
	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL + "/hooks/T0KEN-IN-PATH?sig=QUERY-TOKEN"
	ln.Close()
	w := webhook(t, url)
	var logs lockedBuffer
	h := newHarness(t, fake, Options{Webhooks: []Webhook{w}, Logger: newTestLogger(&logs)})
	h.d.Event(turnEnded("s1", 1))
	e := h.attempt(t)
	if e.Status != StatusRetrying || !strings.Contains(e.Error, "connect") {
		t.Errorf("attempt to a closed port: %+v", e)
	}
	shown, _ := json.Marshal(h.d.Log(0))
	printed := fmt.Sprintf("%v %+v %#v %s", w, w, w, w.Secret)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h.d)
	var metrics bytes.Buffer
	if mfs, err := reg.Gather(); err == nil {
		for _, mf := range mfs {
			fmt.Fprintln(&metrics, mf.String())
		}
	} else {
		t.Error(err)
	}
	for what, text := range map[string]string{"the log": string(shown), "fmt": printed, "the metrics": metrics.String(), "the logs": logs.String()} {
		for _, hidden := range []string{string(secret), "T0KEN-IN-PATH", "QUERY-TOKEN"} {
			if strings.Contains(text, hidden) {
				t.Errorf("%s shows %q: %s", what, hidden, text)
			}
		}
	}
	if !strings.Contains(string(shown), ln.URL) {
		t.Errorf("the log does not name the webhook's host: %s", shown)
	}
}

// TestRedirectIsAFailure: a receiver's redirect is not followed (it
// could lead anywhere the checks of the URL refuse): it fails the attempt.
func TestRedirectIsAFailure(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/elsewhere" {
			t.Error("the redirect was followed")
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL+"/hook")}})
	h.d.Event(turnEnded("s1", 1))
	rc.next(t)
	if e := h.attempt(t); e.Status != StatusRetrying || e.Code != http.StatusTemporaryRedirect || !strings.Contains(e.Error, "follows none") {
		t.Errorf("%+v", e)
	}
}

// TestEventsAWebhookDoesNotWant go nowhere, and a nil or empty
// dispatcher takes events and does nothing.
func TestEventsAWebhookDoesNotWant(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, nil)
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL, events.NeedsInput)}})
	h.d.Event(turnEnded("s1", 1))
	h.d.Event(events.Event{Kind: events.NeedsInput, Time: epoch, Session: events.Session{URI: "ahp-session:/s1", ID: "s1"},
		Request: &events.Request{ID: "ask-1", Kind: events.RequestQuestion, Text: "Which file?"}})
	got := rc.next(t)
	if got.body.Event != events.NeedsInput || got.body.Request == nil || got.body.Request.Text != "Which file?" || got.body.Request.AnswerPath != "/v1/sessions/s1/questions/ask-1" {
		t.Errorf("%s", got.raw)
	}
	h.attempt(t)
	if n := len(h.d.Log(0).Deliveries); n != 1 {
		t.Errorf("%d deliveries, want the needs_input one", n)
	}

	var none *Dispatcher
	none.Event(turnEnded("s1", 1))
	if err := none.Close(context.Background()); err != nil {
		t.Error(err)
	}
	empty, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty.Event(turnEnded("s1", 1))
	if err := empty.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

func hmacHex(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// lockedBuffer takes the logs of the dispatcher's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// value reads a counter or a gauge.
func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue() + m.GetGauge().GetValue()
}

// TestRetryAfter: a receiver's Retry-After (seconds) lengthens the
// backoff, up to its cap.
func TestRetryAfter(t *testing.T) {
	fake := clock.NewFake(epoch)
	rc := newReceiver(t, fake.Now, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", map[int]string{1: "120", 2: "86400"}[n])
		w.WriteHeader(http.StatusTooManyRequests)
	})
	h := newHarness(t, fake, Options{Webhooks: []Webhook{webhook(t, rc.srv.URL)}})
	h.d.Event(turnEnded("s1", 1))
	rc.next(t)
	if e := h.attempt(t); e.Next.Sub(e.LastAttempt) != 2*time.Minute {
		t.Errorf("after Retry-After: 120, the next in %v", e.Next.Sub(e.LastAttempt))
	} else {
		h.advanceTo(e.Next)
	}
	rc.next(t)
	if e := h.attempt(t); e.Next.Sub(e.LastAttempt) != maxBackoff {
		t.Errorf("after Retry-After: 86400, the next in %v, want the cap %v", e.Next.Sub(e.LastAttempt), maxBackoff)
	}
}

// TestLoopbackOnly: plain http taken because it is loopback connects
// nowhere else, whatever its name resolves to.
func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:80": true, "127.9.9.9:80": true, "[::1]:80": true, "10.0.0.1:80": false, "93.184.216.34:443": false, "[fe80::1]:80": false} {
		if err := loopbackOnly("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
