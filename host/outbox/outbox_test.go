package outbox

import (
	"slices"
	"sync"
	"testing"

	"github.com/ahpd/ahpd/internal/lockcheck"
	"github.com/ahpd/ahpd/protocol"
)

// sink records what it is handed, in order, and runs Go's work on
// goroutines the test waits for.
type sink struct {
	mu      sync.Mutex
	got     []string
	journal []string
	wg      sync.WaitGroup
	// during, when set, runs inside the first Publish: the owner queuing
	// more while a batch is handed on.
	during func()
}

func (s *sink) Publish(journal string, run []Effect) int64 {
	s.mu.Lock()
	for it := range Items(run) {
		s.got = append(s.got, it.Channel)
	}
	s.journal = append(s.journal, journal)
	during := s.during
	s.during = nil
	s.mu.Unlock()
	if during != nil {
		during()
	}
	return int64(len(run))
}

func (s *sink) Go(fn func()) { s.wg.Go(fn) }

func (s *sink) note(what string) func() {
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, what)
	}
}

func TestReleaseHandsOnInOrder(t *testing.T) {
	var mu lockcheck.Mutex
	o := New("j")
	sk := &sink{}
	mu.Lock()
	o.Publish("a", &protocol.RootActiveSessionsChangedAction{}, nil)
	o.Later(sk.note("x"))
	o.Publish("b", &protocol.RootActiveSessionsChangedAction{}, nil)
	o.Publish("c", &protocol.RootActiveSessionsChangedAction{}, nil)
	// Queued while the first batch is handed on: handed on by a goroutine
	// of its own (Sink.Go), after the first batch.
	sk.during = func() {
		mu.Lock()
		o.Publish("d", &protocol.RootActiveSessionsChangedAction{}, nil)
		o.Later(sk.note("y"))
		mu.Unlock()
	}
	Release(&mu, o, sk)
	sk.wg.Wait()

	if want := []string{"a", "x", "b", "c", "d", "y"}; !slices.Equal(sk.got, want) {
		t.Fatalf("handed on %v, want %v", sk.got, want)
	}
	if got := o.Written(); got != 4 {
		t.Errorf("Written = %d, want 4 (the actions, as the sink counted them)", got)
	}
	for _, j := range sk.journal {
		if j != "j" {
			t.Errorf("published to journal %q, want %q", j, "j")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ch := o.EmptyLocked(); ch != nil {
		t.Error("EmptyLocked returned a channel with nothing queued")
	}
}

func TestEmptyAndFull(t *testing.T) {
	var mu lockcheck.Mutex
	o := New("")
	sk := &sink{}
	mu.Lock()
	for range MaxBacklog {
		o.Later(func() {})
	}
	empty, full := o.EmptyLocked(), o.FullLocked()
	if empty == nil || full == nil {
		t.Fatalf("a full outbox: EmptyLocked %v, FullLocked %v; want both channels", empty, full)
	}
	Release(&mu, o, sk)
	for name, ch := range map[string]chan struct{}{"empty": empty, "room": full} {
		select {
		case <-ch:
		default:
			t.Errorf("the %s channel is not closed once the queue was handed on", name)
		}
	}
	sk.wg.Wait()
}
