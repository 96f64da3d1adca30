package host

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/ahpd/ahpd/host/session"
)

// countingStore records every save and removal, and can hold saves.
type countingStore struct {
	mu      sync.Mutex
	files   map[string]string
	saves   int
	gate    chan struct{} // with entered, each save waits for a send on gate
	entered chan string   // each save sends its bytes, then waits
}

func (s *countingStore) load() ([]*session.Record, error) { return nil, nil }

func (s *countingStore) save(id string, data []byte) error {
	if s.entered != nil {
		s.entered <- string(data)
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[id] = string(data)
	s.saves++
	return nil
}

func (s *countingStore) remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, id)
	return nil
}

func (s *countingStore) get(id string) (string, bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.files[id]
	return v, ok, s.saves
}

// A burst of changes while a write is under way is one more write, of the
// newest record.
func TestRecordWriterCoalesces(t *testing.T) {
	t.Parallel()
	st := &countingStore{files: map[string]string{}, gate: make(chan struct{}), entered: make(chan string)}
	w := newRecordWriter(st, func() {})
	told := make(chan error, 200)
	w.queue("s1", []byte("v0"), func(err error) { told <- err })
	if got := <-st.entered; got != "v0" {
		t.Fatalf("first write %q", got)
	}
	for i := 1; i <= 100; i++ {
		w.queue("s1", fmt.Appendf(nil, "v%d", i), func(err error) { told <- err })
	}
	st.gate <- struct{}{}
	if got := <-st.entered; got != "v100" {
		t.Fatalf("second write %q, want the newest", got)
	}
	st.gate <- struct{}{}
	<-told
	<-told
	st.entered = nil
	w.close()
	if v, _, saves := st.get("s1"); v != "v100" || saves != 2 {
		t.Errorf("the store holds %q after %d saves; want v100 after 2", v, saves)
	}
}

// A write made now wins over older bytes queued or under way, and a
// removal is not undone by a write that was waiting.
func TestRecordWriterKeepsTheLastWord(t *testing.T) {
	t.Parallel()
	st := &countingStore{files: map[string]string{}, gate: make(chan struct{}), entered: make(chan string)}
	w := newRecordWriter(st, func() {})
	defer w.close()
	nop := func(error) {}
	w.queue("s1", []byte("old"), nop)
	<-st.entered // "old" is under way
	w.queue("s1", []byte("older than now"), nop)
	done := make(chan error)
	go func() { done <- w.writeNow("s1", []byte("now")) }()
	// writeNow drops what waits before it waits itself.
	for w.waiting("s1") {
		runtime.Gosched()
	}
	st.gate <- struct{}{} // "old" ends
	if got := <-st.entered; got != "now" {
		t.Fatalf("after the write under way came %q, want now", got)
	}
	st.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st.entered = nil
	w.queue("s2", []byte("s2"), nop)
	if err := w.removeNow("s2"); err != nil {
		t.Fatal(err)
	}
	w.close()
	if v, _, _ := st.get("s1"); v != "now" {
		t.Errorf("s1 holds %q, want now", v)
	}
	if _, ok, _ := st.get("s2"); ok {
		t.Error("a removed record came back")
	}
}

func (w *recordWriter) waiting(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending[id] != nil
}

// flush writes the record waiting, after the write under way, and the
// session is told of it as of a write of the writer's own.
func TestRecordWriterFlush(t *testing.T) {
	t.Parallel()
	st := &countingStore{files: map[string]string{}, gate: make(chan struct{}), entered: make(chan string)}
	w := newRecordWriter(st, func() {})
	told := make(chan error, 2)
	w.queue("s1", []byte("v0"), func(err error) { told <- err })
	if got := <-st.entered; got != "v0" {
		t.Fatalf("first write %q", got)
	}
	w.queue("s1", []byte("v1"), func(err error) { told <- err })
	flushed := make(chan struct{})
	go func() {
		w.flush("s1")
		close(flushed)
	}()
	st.gate <- struct{}{} // v0 ends
	if got := <-st.entered; got != "v1" {
		t.Fatalf("second write %q", got)
	}
	st.gate <- struct{}{}
	<-flushed
	if v, _, saves := st.get("s1"); v != "v1" || saves != 2 {
		t.Errorf("after flush: %q in %d saves, want v1 in 2", v, saves)
	}
	for range 2 {
		if err := <-told; err != nil {
			t.Error(err)
		}
	}
	st.entered = nil
	w.close()
}
