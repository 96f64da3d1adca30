package host

import (
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// recordWriter writes session records off the sessions' locks. A session
// hands it its record's bytes, encoded under its lock (no I/O there), and
// goes on; the writer's goroutine writes the newest bytes of each session,
// so a burst of changes costs one write and no client waits on the disk.
//
// A write that must be done before a change is told (keep) and a removal
// go through writeNow and removeNow, which wait: they drop the session's
// write not yet started, whose bytes are older, and let one under way end
// first, so the file is always left as the last caller asked.
type recordWriter struct {
	store  store
	failed func() // counts a failed write or removal

	mu      lockcheck.Mutex
	pending map[string]*queuedWrite  // by session id: the newest bytes not yet written
	order   []string                 // ids in pending, oldest first
	busy    map[string]chan struct{} // by session id: closed when its write under way ends
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

// queuedWrite is one session's record waiting to be written, and who is
// told how it went.
type queuedWrite struct {
	data []byte
	told func(error)
}

func newRecordWriter(st store, failed func()) *recordWriter {
	w := &recordWriter{
		mu:      lockcheck.Mutex{Class: "writer"},
		store:   st,
		failed:  failed,
		pending: map[string]*queuedWrite{},
		busy:    map[string]chan struct{}{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go w.loop()
	return w
}

// queue has data written as id's record, in the background, replacing
// bytes of id still waiting. told is called from the writer's goroutine
// with the write's result, holding none of the writer's state: it may
// take the session's lock. A writer that was closed writes at once.
func (w *recordWriter) queue(id string, data []byte, told func(error)) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		told(w.save(id, data))
		return
	}
	if _, waiting := w.pending[id]; !waiting {
		w.order = append(w.order, id)
	}
	w.pending[id] = &queuedWrite{data: data, told: told}
	w.mu.Unlock()
	w.signal()
}

// writeNow writes data as id's record before it returns.
func (w *recordWriter) writeNow(id string, data []byte) error {
	release := w.claim(id, true)
	defer release()
	return w.save(id, data)
}

// flush writes id's record waiting to be written, if any, before it
// returns, after a write of it under way.
func (w *recordWriter) flush(id string) {
	release := w.claim(id, false)
	w.mu.Lock()
	q := w.pending[id]
	delete(w.pending, id)
	w.mu.Unlock()
	var err error
	if q != nil {
		err = w.save(id, q.data)
	}
	release()
	if q != nil {
		q.told(err)
	}
}

// removeNow removes id's record before it returns.
func (w *recordWriter) removeNow(id string) error {
	release := w.claim(id, true)
	defer release()
	err := w.store.remove(id)
	if err != nil {
		w.failed()
	}
	return err
}

// claim makes id's record the caller's to write once a write of it under
// way has ended. With drop, a write of it waiting is dropped too: the
// caller's is newer, and the session hears how that one went. The caller
// calls release when done.
func (w *recordWriter) claim(id string, drop bool) (release func()) {
	w.mu.Lock()
	for {
		if drop {
			delete(w.pending, id)
		}
		ch, busy := w.busy[id]
		if !busy {
			break
		}
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	mine := make(chan struct{})
	w.busy[id] = mine
	w.mu.Unlock()
	return w.releaser(id, mine)
}

func (w *recordWriter) save(id string, data []byte) error {
	err := w.store.save(id, data)
	if err != nil {
		w.failed()
	}
	return err
}

// loop writes what is queued until close, then what is left.
func (w *recordWriter) loop() {
	defer close(w.done)
	for {
		id, q, release, closed := w.next()
		if q == nil {
			if closed {
				return
			}
			<-w.wake
			continue
		}
		err := w.save(id, q.data)
		release()
		q.told(err)
	}
}

// next takes the oldest waiting write whose session no other write is
// under way for, and claims the session's record for it in the same
// breath: a write that waits for it to end then knows its bytes are newer.
func (w *recordWriter) next() (id string, q *queuedWrite, release func(), closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 0; i < len(w.order); i++ {
		id := w.order[i]
		q := w.pending[id]
		if q == nil {
			w.order = append(w.order[:i], w.order[i+1:]...)
			i--
			continue
		}
		if _, busy := w.busy[id]; busy {
			continue // its holder wakes the loop when done
		}
		w.order = append(w.order[:i], w.order[i+1:]...)
		delete(w.pending, id)
		mine := make(chan struct{})
		w.busy[id] = mine
		return id, q, w.releaser(id, mine), w.closed
	}
	return "", nil, nil, w.closed && len(w.order) == 0
}

// releaser ends a claim on id's record.
func (w *recordWriter) releaser(id string, mine chan struct{}) func() {
	return func() {
		w.mu.Lock()
		delete(w.busy, id)
		w.mu.Unlock()
		close(mine)
		w.signal()
	}
}

func (w *recordWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// close writes what is waiting and stops the goroutine; later writes are
// made at once by their callers.
func (w *recordWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
	<-w.done
}
