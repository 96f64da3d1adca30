package httpapi

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
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
// maxKeptBytes of bodies, the oldest dropped first: a retry comes within
// minutes, and a host restarted meanwhile answers the key as new (a
// session's client-chosen id, POST /v1/sessions's "id", is the way to a
// create that holds across restarts).

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
	mu    sync.Mutex
	byID  map[string]*keyed
	order []*keyed // oldest first
	bytes int
}

func newKeys(now func() time.Time) *keys {
	if now == nil {
		now = time.Now
	}
	return &keys{now: now, byID: map[string]*keyed{}}
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

	first, e := k.begin(id, fp)
	switch {
	case first:
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		k.finish(e, rec)
	case e.fingerprint != fp:
		writeError(w, &apiError{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was sent with another request: use a new key for each request", Field: "Idempotency-Key"})
	case !e.done:
		writeError(w, &apiError{Status: http.StatusConflict, Code: "request_in_progress",
			Message: "the request with this Idempotency-Key is still being answered: send it again later"})
	case e.tooLarge:
		writeError(w, &apiError{Status: http.StatusConflict, Code: "idempotency_key_used",
			Message: "the request with this Idempotency-Key was answered with " + strconv.Itoa(e.status) + " and an answer too large to keep: read the resource it made"})
	default:
		for name, v := range e.header {
			w.Header()[name] = v
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(e.status)
		_, _ = w.Write(e.body)
	}
}

// begin finds the request kept under id, or keeps a new one in flight and
// reports first.
func (k *keys) begin(id string, fp [sha256.Size]byte) (first bool, e *keyed) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	k.expireLocked(now)
	if e := k.byID[id]; e != nil {
		return false, e
	}
	e = &keyed{id: id, fingerprint: fp, at: now}
	k.byID[id] = e
	k.order = append(k.order, e)
	for len(k.order) > maxKept {
		k.dropLocked(k.order[0])
	}
	return true, e
}

// finish keeps the answer rec recorded, or lets the key go when it is one
// a retry should not be given.
func (k *keys) finish(e *keyed, rec *recorder) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID[e.id] != e {
		return // dropped meanwhile, to keep within the bounds
	}
	status := rec.statusOr200()
	if status >= 500 || status == http.StatusTooManyRequests {
		k.dropLocked(e)
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
		return
	}
	e.body = rec.body.Bytes()
	k.bytes += len(e.body)
	for k.bytes > maxKeptBytes && len(k.order) > 0 {
		k.dropLocked(k.order[0])
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

// recorder passes an answer on and keeps a copy of it, up to maxKeptBody.
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
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if !r.overflow {
		if r.body.Len()+len(p) > maxKeptBody {
			r.overflow = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) statusOr200() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
