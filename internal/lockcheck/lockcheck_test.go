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
