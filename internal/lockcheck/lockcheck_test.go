package lockcheck_test

import (
	"testing"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// TestNesting: with the tag, a lock taken holding another is a violation
// unless allowed; one at a time is none. Without it nothing is tracked.
func TestNesting(t *testing.T) {
	a := &lockcheck.Mutex{Class: "a"}
	b := &lockcheck.Mutex{Class: "b"}
	c := &lockcheck.RWMutex{Class: "c"}
	lockcheck.Allow("a", "c")
	lockcheck.Violations()
	n := 0 // what the locks guard

	a.Lock()
	n++
	a.Unlock()
	b.Lock()
	n++
	b.Unlock()
	if v := lockcheck.Violations(); len(v) != 0 {
		t.Fatalf("one at a time: %v", v)
	}

	a.Lock()
	c.RLock()
	_ = n
	c.RUnlock()
	b.Lock()
	n++
	b.Unlock()
	a.Unlock()
	v := lockcheck.Violations()
	if !lockcheck.Enabled {
		if len(v) != 0 {
			t.Fatalf("untracked build: %v", v)
		}
		return
	}
	if len(v) != 1 || v[0].Held != "a" || v[0].Taken != "b" {
		t.Fatalf("want one violation, b under a: %v", v)
	}
	// Let go on another goroutine, the lock is no longer held.
	a.Lock()
	done := make(chan struct{})
	go func() { n++; a.Unlock(); close(done) }()
	<-done
	b.Lock()
	n++
	b.Unlock()
	if v := lockcheck.Violations(); len(v) != 0 {
		t.Fatalf("after a was let go elsewhere: %v", v)
	}
}

// TestOwned: with the tag, a lock of an owned class taken by a function
// that is not the owner's is a violation, once per function; the owner's
// functions, closures in them included, take it freely.
func TestOwned(t *testing.T) {
	m := &lockcheck.Mutex{Class: "owned"}
	lockcheck.Own("owned", "github.com/ahpd/ahpd/internal/lockcheck_test.ownerOf")
	lockcheck.Violations()
	ownerOf(m)
	if v := lockcheck.Violations(); len(v) != 0 {
		t.Fatalf("the owner taking it: %v", v)
	}
	n := 0
	for range 2 {
		m.Lock()
		_ = m.TryLock()
		n++
		m.Unlock()
	}
	_ = n
	v := lockcheck.Violations()
	if !lockcheck.Enabled {
		if len(v) != 0 {
			t.Fatalf("untracked build: %v", v)
		}
		return
	}
	if len(v) != 1 || v[0].Taken != "owned" || v[0].Owner == "" {
		t.Fatalf("want one violation, by the test: %v", v)
	}
}

// ownerOf takes m's lock, as its owner, in a closure too.
func ownerOf(m *lockcheck.Mutex) {
	n := 0 // what the lock guards
	m.Lock()
	n++
	m.Unlock()
	func() {
		m.Lock()
		defer m.Unlock()
		n++
	}()
	_ = n
}
