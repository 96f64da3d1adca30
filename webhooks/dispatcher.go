package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/events"
)

// Options configure a Dispatcher. The zero value is valid: no webhooks,
// so every event is let go.
type Options struct {
	Webhooks []Webhook
	// Dir is where deliveries that wait are kept across restarts; ""
	// keeps them in memory only (lost when the process ends).
	Dir string
	// Clock is where backoff, attempt timeouts and timestamps read the
	// time; nil is the wall clock.
	Clock clock.Clock
	// Logger receives what became of deliveries that failed or were
	// dropped; nil discards it.
	Logger *slog.Logger
	// UserAgent is sent with each delivery; "" is "ahpd".
	UserAgent string
	// LogSize is how many recent deliveries the log keeps; 0 is 500.
	LogSize int

	// attempted, when set, is told each attempt's outcome once it is
	// recorded and the next attempt, if any, scheduled: tests wait on it
	// instead of sleeping.
	attempted func(Entry)
}

// The statuses of a delivery in the log.
const (
	StatusPending   = "pending"   // waiting for its first attempt
	StatusSending   = "sending"   // an attempt is under way
	StatusRetrying  = "retrying"  // an attempt failed; Next is the next one
	StatusDelivered = "delivered" // a 2xx answered
	StatusFailed    = "failed"    // given up: still failing RetryFor after the event
	StatusDropped   = "dropped"   // let go unsent: MaxPending others waited behind it
)

// Entry is one delivery in the log: an event to one webhook.
type Entry struct {
	ID       string      `json:"id"`
	Webhook  string      `json:"webhook"`
	Event    events.Kind `json:"event"`
	Session  string      `json:"session,omitempty"`
	Time     time.Time   `json:"time"` // when the event was handed over
	Status   string      `json:"status"`
	Attempts int         `json:"attempts"`
	// Code is the HTTP status the last attempt was answered with; 0 for
	// none (a timeout, a connection that failed).
	Code        int       `json:"code,omitempty"`
	Error       string    `json:"error,omitempty"` // why the last attempt failed
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	Next        time.Time `json:"next,omitzero"` // when it is tried again
}

// Log is what ahpd/webhookLog answers: the webhooks, and their recent
// deliveries, newest first.
type Log struct {
	Webhooks   []Status `json:"webhooks"`
	Deliveries []Entry  `json:"deliveries"`
}

// Status is a webhook as the log shows it.
type Status struct {
	Name      string        `json:"name"`
	URL       string        `json:"url"` // its scheme and host only
	Events    []events.Kind `json:"events"`
	Signed    bool          `json:"signed"`
	Pending   int           `json:"pending"` // waiting or being sent
	Delivered int64         `json:"delivered"`
	Failed    int64         `json:"failed"`
	Dropped   int64         `json:"dropped"`
}

// Backoff between attempts of a delivery: base, doubled each attempt up
// to maxBackoff, each delay drawn between half of that and all of it.
const (
	baseBackoff = 5 * time.Second
	maxBackoff  = 10 * time.Minute
	// maxInflight is how many deliveries a webhook sends at once, each of
	// another session (a session's go one at a time).
	maxInflight = 4
	// errorBytes bounds what the log keeps of a receiver's answer.
	errorBytes = 200
)

// Dispatcher delivers events to webhooks. Event queues; the rest happens
// on its own goroutines, which Close ends.
type Dispatcher struct {
	opts  Options
	clock clock.Clock
	log   *slog.Logger
	hooks []*hook
	m     *metrics

	ctx    context.Context // the attempts': cancelled when Close stops waiting for them
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: the schedulers end

	schedulers sync.WaitGroup
	attempts   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	ring   []*Entry // the log: a ring of the newest deliveries
	next   int      // where the next entry goes in ring
	st     *store   // nil without Options.Dir
}

// hook is one webhook and the deliveries it has waiting.
type hook struct {
	w      Webhook
	client *http.Client
	tr     *http.Transport
	wake   chan struct{} // a token: its scheduler has something to look at

	// Guarded by Dispatcher.mu.
	queues   map[string][]*delivery // by session (the order key), oldest first
	order    []*delivery            // every delivery not done, oldest first; done ones are dropped lazily
	waiting  int                    // neither done nor in flight
	inflight int
	counts   struct{ delivered, failed, dropped int64 }
}

// delivery is one event on its way to one webhook.
type delivery struct {
	id      string
	key     string // what orders it: its session's URI (or its run's)
	event   events.Kind
	session string
	created time.Time
	body    []byte
	line    []byte // its record in the store, while it is kept there

	attempts int
	next     time.Time // not tried before then
	inflight bool
	done     bool
	entry    *Entry
}

// Open starts a dispatcher for opts.Webhooks, with the deliveries that
// were waiting when the last one in opts.Dir stopped.
func Open(opts Options) (*Dispatcher, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "ahpd"
	}
	if opts.LogSize <= 0 {
		opts.LogSize = 500
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{
		opts: opts, clock: opts.Clock, log: opts.Logger,
		ctx: ctx, cancel: cancel, stop: make(chan struct{}),
		ring: make([]*Entry, opts.LogSize),
	}
	for i := range opts.Webhooks {
		w := opts.Webhooks[i]
		client, tr := newClient(&w)
		d.hooks = append(d.hooks, &hook{w: w, client: client, tr: tr, wake: make(chan struct{}, 1), queues: map[string][]*delivery{}})
	}
	d.m = newMetrics(d.hooks)
	if opts.Dir != "" {
		if err := d.load(opts.Dir); err != nil {
			cancel()
			return nil, err
		}
	}
	for _, h := range d.hooks {
		d.schedulers.Add(1)
		go d.run(h)
	}
	return d, nil
}

// Event hands an event over to be delivered to every webhook that wants
// it (events.Sink). It returns at once: it encodes the body and queues.
func (d *Dispatcher) Event(ev events.Event) {
	if d == nil || !slices.ContainsFunc(d.hooks, func(h *hook) bool { return h.w.wants(ev.Kind) }) {
		return
	}
	id := newID()
	body, key := bodyOf(id, ev)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.log.Warn("webhooks: an event came after they stopped, and is not delivered", "event", ev.Kind, "session", ev.Session.URI)
		return
	}
	now := d.clock.Now()
	for _, h := range d.hooks {
		if !h.w.wants(ev.Kind) {
			continue
		}
		dl := &delivery{id: id, key: key, event: ev.Kind, session: ev.Session.URI, created: now, body: body, next: now}
		d.enqueueLocked(h, dl)
		if d.st != nil {
			d.st.addLocked(h, dl)
		}
	}
}

// enqueueLocked queues dl behind its session's deliveries to h, letting
// h's oldest waiting delivery go when MaxPending already wait.
func (d *Dispatcher) enqueueLocked(h *hook, dl *delivery) {
	if h.waiting >= h.w.MaxPending {
		d.dropOldestLocked(h)
	}
	h.queues[dl.key] = append(h.queues[dl.key], dl)
	h.order = append(h.order, dl)
	h.waiting++
	dl.entry = &Entry{ID: dl.id, Webhook: h.w.Name, Event: dl.event, Session: dl.session, Time: dl.created, Status: StatusPending}
	d.ring[d.next] = dl.entry
	d.next = (d.next + 1) % len(d.ring)
	d.m.pending(h)
	h.poke()
}

// dropOldestLocked lets h's oldest waiting delivery go, unsent: a
// receiver down for long must not grow ahpd without bound. The dropped
// one is logged and counted.
func (d *Dispatcher) dropOldestLocked(h *hook) {
	for _, dl := range h.order {
		if dl.done || dl.inflight {
			continue
		}
		dl.entry.Error = fmt.Sprintf("%d deliveries waited for %s: the oldest is let go", h.w.MaxPending, h.w.Name)
		d.finishLocked(h, dl, StatusDropped)
		d.log.Warn("webhooks: a delivery was dropped: too many wait", "webhook", h.w.Name, "event", dl.event, "session", dl.session, "id", dl.id, "maxPending", h.w.MaxPending)
		return
	}
}

// finishLocked ends a delivery that waits (none in flight: an attempt
// that ended counts as waiting again): delivered, given up or dropped.
func (d *Dispatcher) finishLocked(h *hook, dl *delivery, status string) {
	dl.done = true
	q := h.queues[dl.key]
	if i := slices.Index(q, dl); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(h.queues, dl.key)
	} else {
		h.queues[dl.key] = q
	}
	h.waiting--
	if len(h.order) > 64 && len(h.order) > 2*(h.waiting+h.inflight) {
		h.order = slices.DeleteFunc(h.order, func(x *delivery) bool { return x.done })
	}
	dl.entry.Status, dl.entry.Next = status, time.Time{}
	switch status {
	case StatusDelivered:
		h.counts.delivered++
	case StatusFailed:
		h.counts.failed++
	case StatusDropped:
		h.counts.dropped++
	}
	d.m.finished(h, status)
	d.m.pending(h)
	if d.st != nil {
		d.st.doneLocked(h, dl)
	}
	dl.body = nil
}

func (h *hook) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run is h's scheduler: it starts each session's first delivery once it
// is due, a few sessions at a time, and sleeps until the next is due or
// something changes.
func (d *Dispatcher) run(h *hook) {
	defer d.schedulers.Done()
	for {
		next, ok := d.startDue(h)
		if !ok {
			return
		}
		var at <-chan time.Time
		stop := func() {}
		if !next.IsZero() {
			at, stop = d.clock.At(next)
		}
		select {
		case <-h.wake:
		case <-at:
		case <-d.stop:
			stop()
			return
		}
		stop()
	}
}

// startDue starts the deliveries of h that are due, and returns when the
// next one not yet due is (zero for none); false once closed.
func (d *Dispatcher) startDue(h *hook) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return time.Time{}, false
	}
	now := d.clock.Now()
	var due []*delivery
	var next time.Time
	for _, q := range h.queues {
		dl := q[0] // a session's deliveries go in order: only its first may go
		switch {
		case dl.inflight:
		case !dl.next.After(now):
			due = append(due, dl)
		case next.IsZero() || dl.next.Before(next):
			next = dl.next
		}
	}
	slices.SortFunc(due, func(a, b *delivery) int { return cmp.Or(a.next.Compare(b.next), a.created.Compare(b.created)) })
	for _, dl := range due {
		if h.inflight >= maxInflight {
			break // the end of an attempt wakes the scheduler again
		}
		dl.inflight, dl.attempts = true, dl.attempts+1
		h.waiting--
		h.inflight++
		dl.entry.Status, dl.entry.Attempts, dl.entry.LastAttempt, dl.entry.Next = StatusSending, dl.attempts, now, time.Time{}
		d.attempts.Add(1)
		go d.attempt(h, dl, dl.attempts, dl.body, now)
	}
	return next, true
}

// result is what an attempt came to.
type result struct {
	ok         bool
	code       int
	err        string
	stopped    bool          // Close cut it short
	retryAfter time.Duration // what the receiver asked for
}

// attempt makes attempt n of dl and records what came of it.
func (d *Dispatcher) attempt(h *hook, dl *delivery, n int, body []byte, started time.Time) {
	defer d.attempts.Done()
	wall := time.Now()
	res := d.post(h, dl, n, body, started)
	d.m.attempted(h, time.Since(wall), res.ok)

	d.mu.Lock()
	h.inflight--
	h.waiting++ // back among those waiting, until it is finished
	dl.inflight = false
	now := d.clock.Now()
	e := dl.entry
	e.Code, e.Error = res.code, res.err
	switch {
	case res.ok:
		d.finishLocked(h, dl, StatusDelivered)
		d.log.Debug("webhooks: delivered", "webhook", h.w.Name, "event", dl.event, "session", dl.session, "id", dl.id, "attempts", n)
	case res.stopped:
		e.Status = StatusPending
		d.log.Info("webhooks: a delivery was under way as ahpd stopped; it is sent again at the next start", "webhook", h.w.Name, "id", dl.id)
	case !now.Before(dl.created.Add(h.w.RetryFor)):
		d.finishLocked(h, dl, StatusFailed)
		d.log.Warn("webhooks: gave up on a delivery", "webhook", h.w.Name, "url", h.w.Shown(), "event", dl.event, "session", dl.session, "id", dl.id, "attempts", n, "for", now.Sub(dl.created).Round(time.Second), "err", res.err)
	default:
		delay := max(backoff(n), min(res.retryAfter, maxBackoff))
		next := now.Add(delay)
		if last := dl.created.Add(h.w.RetryFor); next.After(last) {
			next = last // the last attempt is made as the time runs out
		}
		dl.next = next
		e.Status, e.Next = StatusRetrying, next
		d.log.Debug("webhooks: an attempt failed", "webhook", h.w.Name, "id", dl.id, "attempt", n, "err", res.err, "next", next)
	}
	seen := *e
	d.mu.Unlock()
	h.poke()
	if d.opts.attempted != nil {
		d.opts.attempted(seen)
	}
}

// backoff is the delay after attempt n failed: baseBackoff doubled each
// attempt up to maxBackoff, drawn between half of it and all of it, so
// that deliveries that failed together do not come back together.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 20 {
		d = min(baseBackoff<<(n-1), maxBackoff)
	}
	return d/2 + mrand.N(d/2+1)
}

// post sends dl to h once and says what came of it. The attempt ends
// after h's Timeout by the dispatcher's clock.
func (d *Dispatcher) post(h *hook, dl *delivery, n int, body []byte, started time.Time) result {
	ctx, cancel := context.WithCancel(d.ctx)
	timeout, stopTimer := d.clock.At(started.Add(h.w.Timeout))
	var timedOut atomic.Bool
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-timeout:
			timedOut.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		<-watched
		stopTimer()
	}()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.w.URL, bytes.NewReader(body))
	if err != nil {
		return result{err: "the request could not be made: " + oneLine(describe(err))}
	}
	ts := strconv.FormatInt(d.clock.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.opts.UserAgent)
	req.Header.Set(HeaderEvent, string(dl.event))
	req.Header.Set(HeaderDelivery, dl.id)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderAttempt, strconv.Itoa(n))
	if h.w.Secret != nil {
		req.Header.Set(HeaderSignature, Sign(h.w.Secret, ts, body))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		switch {
		case timedOut.Load():
			return result{err: fmt.Sprintf("no answer within %v", h.w.Timeout)}
		case d.ctx.Err() != nil:
			return result{stopped: true, err: "ahpd stopped during the attempt"}
		}
		return result{err: oneLine(describe(err))}
	}
	defer resp.Body.Close()
	head, err := io.ReadAll(io.LimitReader(resp.Body, errorBytes))
	if err == nil {
		// The rest, a little of it, so that the connection is used again.
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	if resp.StatusCode/100 == 2 {
		return result{ok: true, code: resp.StatusCode}
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if resp.StatusCode/100 == 3 {
		msg += " (a redirect: ahpd follows none; give the URL it points to)"
	}
	if text := oneLine(string(head)); text != "" {
		msg += ": " + cut(text, errorBytes)
	}
	if err != nil && timedOut.Load() {
		msg += fmt.Sprintf(" (the rest did not come within %v)", h.w.Timeout)
	}
	return result{code: resp.StatusCode, err: msg, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
}

// describe says why a request failed without its URL: a url.Error
// quotes the whole URL, whose path may hold the receiver's token.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// retryAfter reads a Retry-After header's seconds; 0 for none, or a date.
func retryAfter(v string) time.Duration {
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	return 0
}

// newClient is the HTTP client of one webhook: its own connections,
// proxies from the environment (never for loopback), redirects not
// followed, and, for plain http taken because it is loopback, a dialer
// that connects nowhere else (a name such as localhost resolving beyond
// this machine is refused).
func newClient(w *Webhook) (*http.Client, *http.Transport) {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if u, err := url.Parse(w.URL); err == nil && u.Scheme == "http" && !w.AllowInsecure {
		dialer.Control = loopbackOnly
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxInflight,
		MaxIdleConnsPerHost:   maxInflight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, tr
}

func loopbackOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("plain http goes to this machine only, and this webhook's host is at %s (allowInsecure: true allows it)", host)
	}
	return nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}

// EventLog is the log (host.EventLog): the webhooks, and their newest
// limit deliveries (all that are kept for 0), newest first.
func (d *Dispatcher) EventLog(limit int) any { return d.Log(limit) }

// Log returns the webhooks and their newest limit deliveries (all that
// are kept for 0), newest first.
func (d *Dispatcher) Log(limit int) Log {
	out := Log{Webhooks: []Status{}, Deliveries: []Entry{}}
	if d == nil {
		return out
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.hooks {
		out.Webhooks = append(out.Webhooks, Status{
			Name: h.w.Name, URL: h.w.Shown(), Events: h.w.Events, Signed: h.w.Secret != nil,
			Pending: h.waiting + h.inflight, Delivered: h.counts.delivered, Failed: h.counts.failed, Dropped: h.counts.dropped,
		})
	}
	if limit <= 0 || limit > len(d.ring) {
		limit = len(d.ring)
	}
	for i := 1; i <= len(d.ring) && len(out.Deliveries) < limit; i++ {
		e := d.ring[(d.next-i+len(d.ring))%len(d.ring)]
		if e == nil {
			break
		}
		out.Deliveries = append(out.Deliveries, *e)
	}
	return out
}

// Close stops the dispatcher: no attempt starts from now on, those under
// way get until ctx ends to finish (then they are cut short), and what
// still waits is kept in Dir for the next start. Events after Close are
// let go.
func (d *Dispatcher) Close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	close(d.stop)
	d.schedulers.Wait()
	done := make(chan struct{})
	go func() {
		d.attempts.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		d.cancel()
		<-done
	}
	d.cancel()
	var err error
	if d.st != nil {
		err = d.st.close()
	}
	for _, h := range d.hooks {
		h.tr.CloseIdleConnections()
	}
	return err
}
