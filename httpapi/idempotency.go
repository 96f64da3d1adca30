package httpapi

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ahpd/ahpd/grants"
)

// A POST sent with an Idempotency-Key header is done once: the same key
// sent again by the same person with the same request is answered as the
// first was (the status and body kept, with Idempotent-Replayed: true),
// so a script whose connection was cut before the answer can send it
// again. The same key with another request is 422; while the first is
// still being answered, 409. An answer of 5xx or 429 is not kept: nothing
// was done, or the retry is what was asked for.
//
// The answers are kept in memory, for keyTTL, within maxKept answers and
// maxKeptBytes of bodies, the oldest dropped first. With Options.Answers
// (the journal) they are kept there too, before the first answer is sent
// (keptanswers.go): a host restarted, or another host of its cluster,
// answers the key as the first was, for the same keyTTL. Two requests
// under one key in flight at once on two hosts are both served.

const (
	keyTTL       = 24 * time.Hour
	maxKeyLen    = 255
	maxKept      = 4096
	maxKeptBytes = 32 << 20
	maxKeptBody  = 64 << 10 // a larger answer is kept as answered, without its body
)

// keyed is one Idempotency-Key's request and its answer.
type keyed struct {
	id          string
	fingerprint [sha256.Size]byte
	at          time.Time
	done        bool // answered: status, header and body are set
	status      int
	header      http.Header
	body        []byte
	tooLarge    bool
}

// keys are the answers kept by key. Its lock is its own, held only to
// look up and record, never while a request is served.
type keys struct {
	now   func() time.Time
	store Answers // nil: in memory only
	log   *slog.Logger

	mu    sync.Mutex
	byID  map[string]*keyed
	order []*keyed // oldest first
	bytes int
	// The day answers are kept for in store, and how many were.
	day       string
	keptToday int
	full      bool // kept maxKeptADay today, and said so
}

// newKeys returns the answers kept by now's clock; store and log may be
// nil.
func newKeys(now func() time.Time, store Answers, log *slog.Logger) *keys {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &keys{now: now, store: store, log: log, byID: map[string]*keyed{}}
}

// idempotent serves r with next once per Idempotency-Key, as above. A
// request without the header, or not a POST, is served as it is.
func (k *keys) idempotent(w http.ResponseWriter, r *http.Request, who grants.Principal, next http.Handler) {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || key == "" {
		next.ServeHTTP(w, r)
		return
	}
	if !validKey(key) {
		writeError(w, badRequest("Idempotency-Key", "an Idempotency-Key is 1 to %d visible ASCII characters", maxKeyLen))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	id := fmt.Sprintf("%s\x00%s", who.String(), key)
	fp := fingerprint(r.Method, r.URL.RequestURI(), body)

	first, e, seen := k.begin(id, fp)
	if first && k.store != nil {
		kept, err := k.recall(r.Context(), id)
		if err != nil {
			k.drop(e)
			k.log.Warn("could not look up an Idempotency-Key's kept answer", "err", err)
			w.Header().Set("Retry-After", "1")
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
				Message: "could not look up the answer kept for this Idempotency-Key: send the request again"})
			return
		}
		if kept != nil {
			first, seen = false, k.settle(e, kept)
		}
	}
	switch {
	case first:
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		k.finish(e, rec)
		rec.send()
	case seen.fingerprint != fp:
		writeError(w, &apiError{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was sent with another request: use a new key for each request", Field: "Idempotency-Key"})
	case !seen.done:
		writeError(w, &apiError{Status: http.StatusConflict, Code: "request_in_progress",
			Message: "the request with this Idempotency-Key is still being answered: send it again later"})
	case seen.tooLarge:
		writeError(w, &apiError{Status: http.StatusConflict, Code: "idempotency_key_used",
			Message: "the request with this Idempotency-Key was answered with " + strconv.Itoa(seen.status) + " and an answer too large to keep: read the resource it made"})
	default:
		for name, v := range seen.header {
			w.Header()[name] = v
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(seen.status)
		_, _ = w.Write(seen.body)
	}
}

// begin finds the request kept under id, as it is now, or keeps a new
// one in flight and reports first.
func (k *keys) begin(id string, fp [sha256.Size]byte) (first bool, e *keyed, seen keyed) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	k.expireLocked(now)
	if e := k.byID[id]; e != nil {
		return false, e, *e
	}
	e = &keyed{id: id, fingerprint: fp, at: now}
	k.byID[id] = e
	k.order = append(k.order, e)
	for len(k.order) > maxKept {
		k.dropLocked(k.order[0])
	}
	return true, e, keyed{}
}

// settle makes e, in flight, the answer kept found for it, and returns
// that.
func (k *keys) settle(e, kept *keyed) keyed {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID[e.id] == e {
		e.fingerprint, e.at, e.done, e.status, e.header, e.body, e.tooLarge =
			kept.fingerprint, kept.at, true, kept.status, kept.header, kept.body, kept.tooLarge
		k.bytes += len(e.body)
	}
	return *kept
}

// drop lets e go, served or not.
func (k *keys) drop(e *keyed) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID[e.id] == e {
		k.dropLocked(e)
	}
}

// finish keeps the answer rec recorded, in memory and in the store, or
// lets the key go when it is one a retry should not be given.
func (k *keys) finish(e *keyed, rec *recorder) {
	status := rec.statusOr200()
	k.mu.Lock()
	if k.byID[e.id] != e {
		k.mu.Unlock()
		return // dropped meanwhile, to keep within the bounds
	}
	if status >= 500 || status == http.StatusTooManyRequests {
		k.dropLocked(e)
		k.mu.Unlock()
		return
	}
	e.done, e.status = true, status
	e.header = http.Header{}
	for _, name := range []string{"Content-Type", "Location", "Cache-Control"} {
		if v := rec.Header().Values(name); len(v) > 0 {
			e.header[name] = v
		}
	}
	if rec.overflow {
		e.tooLarge = true
	} else {
		e.body = bytes.Clone(rec.body.Bytes())
		k.bytes += len(e.body)
	}
	kept := *e
	for k.bytes > maxKeptBytes && len(k.order) > 0 {
		k.dropLocked(k.order[0])
	}
	k.mu.Unlock()
	if k.store != nil {
		k.keep(&kept)
	}
}

// expireLocked drops the answers older than keyTTL.
func (k *keys) expireLocked(now time.Time) {
	for len(k.order) > 0 && now.Sub(k.order[0].at) >= keyTTL {
		k.dropLocked(k.order[0])
	}
}

func (k *keys) dropLocked(e *keyed) {
	if k.byID[e.id] == e {
		delete(k.byID, e.id)
	}
	for i, o := range k.order {
		if o == e {
			k.order = append(k.order[:i:i], k.order[i+1:]...)
			break
		}
	}
	k.bytes -= len(e.body)
}

// validKey reports whether key is 1 to maxKeyLen visible ASCII characters
// (the header's value is a string, which may be quoted; it is taken as
// sent).
func validKey(key string) bool {
	if len(key) > maxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// fingerprint is what two requests under one key are compared by.
func fingerprint(method, uri string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(uri))
	h.Write([]byte{0})
	h.Write(body)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// recorder holds an answer back until send, up to maxKeptBody, so that
// it is kept before the client has it; a larger one it passes on as it
// comes, keeping none of it.
type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.overflow {
		return r.ResponseWriter.Write(p)
	}
	if r.body.Len()+len(p) <= maxKeptBody {
		return r.body.Write(p)
	}
	r.overflow = true
	r.ResponseWriter.WriteHeader(r.status)
	if _, err := r.ResponseWriter.Write(r.body.Bytes()); err != nil {
		return 0, err
	}
	r.body = bytes.Buffer{}
	return r.ResponseWriter.Write(p)
}

// send passes on what was held back.
func (r *recorder) send() {
	if r.overflow {
		return
	}
	r.ResponseWriter.WriteHeader(r.statusOr200())
	_, _ = r.ResponseWriter.Write(r.body.Bytes())
}

func (r *recorder) statusOr200() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
