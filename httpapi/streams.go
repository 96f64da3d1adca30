package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
)

// An event stream holds an AHP connection to the host, with its
// goroutines and buffers, for as long as its client keeps it open; a
// person who opens them without end takes the host's memory from
// everybody (4,000 on one guest's token held half a gigabyte). So each
// person, by the principal of their credential, holds at most
// Options.MaxStreamsPerPerson open at once; past that a stream is
// refused with 429 until one of theirs ends. On a host without users
// every request is the connection token's person: the budget is the
// host's.

const (
	defaultMaxStreams = 32
	// streamRetryAfter is the Retry-After of a refused stream, in
	// seconds: a slot frees when a stream ends, which nothing foretells.
	streamRetryAfter = 5
)

// streams counts the event streams each person holds open.
type streams struct {
	limit   int
	log     *slog.Logger
	metrics *Metrics

	mu   sync.Mutex
	open map[string]*share // by principal; a person holding none has none
	// changed is closed, and replaced, when a count changes, so that a
	// test waits on a stream's end rather than sleeps.
	changed chan struct{}
}

// share is one person's open streams.
type share struct {
	n int
	// told says the refusal was logged since the person last held fewer
	// than the limit: a client retrying in a loop is one line, not one
	// each retry.
	told bool
}

func newStreams(limit int, log *slog.Logger, m *Metrics) *streams {
	if limit <= 0 {
		limit = defaultMaxStreams
	}
	return &streams{limit: limit, log: log, metrics: m, open: map[string]*share{}, changed: make(chan struct{})}
}

// take counts one more stream of who's, or answers the refusal and
// returns false. A taken stream is given back by calling release, once.
func (s *streams) take(w http.ResponseWriter, r *http.Request, who string) (release func(), ok bool) {
	s.mu.Lock()
	sh := s.open[who]
	if sh == nil {
		sh = &share{}
		s.open[who] = sh
	}
	if sh.n >= s.limit {
		tell := !sh.told
		sh.told = true
		s.mu.Unlock()
		s.metrics.streamRefused()
		if tell {
			s.log.Warn("refused an event stream: the person holds as many open as they may", "principal", who, "limit", s.limit, "path", r.URL.Path)
		}
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeError(w, &apiError{Status: http.StatusTooManyRequests, Code: "too_many_streams",
			Message: "you hold " + strconv.Itoa(s.limit) + " event streams open, as many as one person may: close one, or send again later"})
		return nil, false
	}
	sh.n++
	s.changedLocked()
	s.mu.Unlock()
	s.metrics.streamOpened()
	var once sync.Once
	return func() { once.Do(func() { s.give(who) }) }, true
}

func (s *streams) give(who string) {
	s.mu.Lock()
	if sh := s.open[who]; sh != nil {
		sh.n--
		sh.told = false
		if sh.n <= 0 {
			delete(s.open, who)
		}
	}
	s.changedLocked()
	s.mu.Unlock()
	s.metrics.streamClosed()
}

func (s *streams) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// count is how many streams who holds open, and a channel closed at the
// next change of any count.
func (s *streams) count(who string) (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if sh := s.open[who]; sh != nil {
		n = sh.n
	}
	return n, s.changed
}
