package checkpoints

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// Slots: the git processes of this package run a few at a time, host-wide.
//
// A host with hundreds of sessions ending turns at once would otherwise
// start a git process for each of them together: they share the same few
// cores with the turns, each takes longer the more there are, and the one
// a turn waits for queues behind all of them. Bounded, the work nobody
// waits for queues instead, where it can be folded (a session whose next
// turn came before its capture started captures once for both), and the
// work somebody waits for goes first: a slot that comes free goes to the
// waiter of the highest Priority then (first come among equals), so a
// capture a turn starts waiting on moves ahead of those nobody waits for.
//
// Pushes and fetches are not bounded here: they wait on the network, not
// the CPU, and have workers of their own (host/pushes.go).

// DefaultProcesses is how many git processes run at once: the CPUs Go
// uses, and no fewer than two, so that a slow one never holds all git.
var DefaultProcesses = max(2, runtime.GOMAXPROCS(0))

var slots = &semaphore{free: DefaultProcesses}

// Processes reports how many git processes may run at once.
func Processes() int {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	return slots.size()
}

type semaphore struct {
	mu      sync.Mutex
	free    int
	held    int
	waiters []*slotWaiter
	waiting atomic.Int64 // len(waiters), read without the lock
	queued  func()       // for tests: called as a waiter joins the queue
}

// Backlogged reports whether git is behind: more callers wait for a slot
// than four times the slots there are, so that a caller's turn would come
// only after several rounds of git. A session's next turn then does not
// wait for its last turn's capture to start, but lets it record both
// turns at once. It takes no lock.
func Backlogged() bool {
	return slots.waiting.Load() > int64(4*DefaultProcesses)
}

type slotWaiter struct {
	ready    chan struct{} // closed once the slot is the waiter's
	priority func() Priority
	granted  bool
	passed   int // slots given to later waiters of a higher priority meanwhile
}

// maxPassed is how many later waiters a waiter lets go first before it
// goes ahead of all but those somebody waits for (Now): under a steady
// stream of staging, the records still get written.
const maxPassed = 8

// Priority orders the waiters for a slot.
type Priority int

const (
	// Later is work nobody waits for that can wait behind the rest:
	// recording a checkpoint whose files are staged.
	Later Priority = iota
	// Soon is work nobody waits for yet that a client will see the end
	// of: staging a turn's files, whose counts follow.
	Soon
	// Now is work somebody waits for: a turn's start.
	Now
)

// At returns a priority that does not change.
func At(p Priority) func() Priority { return func() Priority { return p } }

func (s *semaphore) size() int { return s.free + s.held }

// heldKey marks a context whose caller holds a slot (Acquire): the git
// processes run under it take none of their own.
type heldKey struct{}

// Acquire waits for a slot for the git processes the caller is about to
// run one after the other under the context it returns, so that a
// snapshot's two processes queue once, and returns the function that
// gives it back (once; later calls do nothing). priority is asked
// whenever a slot comes free while the caller waits, under the slots'
// lock: it must take none. It fails only when ctx ends first.
func Acquire(ctx context.Context, priority func() Priority) (context.Context, func(), error) {
	if err := slots.acquire(ctx, priority); err != nil {
		return ctx, func() {}, err
	}
	return context.WithValue(ctx, heldKey{}, true), sync.OnceFunc(slots.release), nil
}

// TryAcquire is Acquire when a slot is free at once and nobody waits for
// one; otherwise it reports false and waits for nothing. It never blocks,
// so a caller may ask holding a lock of its own.
func TryAcquire(ctx context.Context) (context.Context, func(), bool) {
	if !slots.mu.TryLock() {
		return ctx, nil, false
	}
	ok := slots.free > 0 && len(slots.waiters) == 0
	if ok {
		slots.free--
		slots.held++
	}
	slots.mu.Unlock()
	if !ok {
		return ctx, nil, false
	}
	return context.WithValue(ctx, heldKey{}, true), sync.OnceFunc(slots.release), true
}

// holding reports whether ctx carries a slot its caller holds.
func holding(ctx context.Context) bool {
	held, _ := ctx.Value(heldKey{}).(bool)
	return held
}

func (s *semaphore) acquire(ctx context.Context, priority func() Priority) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.free--
		s.held++
		s.mu.Unlock()
		return nil
	}
	w := &slotWaiter{ready: make(chan struct{}), priority: priority}
	s.waiters = append(s.waiters, w)
	s.waiting.Store(int64(len(s.waiters)))
	if s.queued != nil {
		s.queued()
	}
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted {
		// Given a slot as ctx ended: hand it on.
		s.mu.Unlock()
		s.release()
		return ctx.Err()
	}
	for i, o := range s.waiters {
		if o == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
	s.waiting.Store(int64(len(s.waiters)))
	s.mu.Unlock()
	return ctx.Err()
}

// release gives a slot back, to the first waiter of the highest
// priority.
func (s *semaphore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) == 0 {
		s.free++
		s.held--
		return
	}
	pick, best := 0, Later-1
	for i, w := range s.waiters {
		p := w.priority()
		if w.passed >= maxPassed && p < Now {
			p = Now - 1 // its turn has come, behind those somebody waits for
		}
		if p > best {
			pick, best = i, p
			if p == Now {
				break
			}
		}
	}
	for _, w := range s.waiters[:pick] {
		w.passed++
	}
	w := s.waiters[pick]
	s.waiters = append(s.waiters[:pick], s.waiters[pick+1:]...)
	s.waiting.Store(int64(len(s.waiters)))
	w.granted = true
	close(w.ready)
}
