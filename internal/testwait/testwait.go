// Package testwait bounds the waits of tests: how long a test waits for
// something that must happen before it calls the wait hung and fails,
// saying what it waited for.
//
// The bound is a guard against a hang, never a budget: no test asserts
// that something happens sooner than it. A test whose correctness depends
// on time passing runs on a clock it controls (package clock's fake) or
// waits on the event itself.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Hang is how long a test waits for what must happen. A loaded 2-core
// machine running the race detector takes a minute over what takes a
// second on a quiet one, so it is minutes; it is less than go test's own
// -timeout (10 minutes a package), so that a hang is reported with what
// was awaited rather than only a dump of goroutines.
const Hang = 3 * time.Minute

// Context returns a context that ends after Hang, or when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	t.Cleanup(cancel)
	return ctx
}

// Until calls cond every few milliseconds until it holds, failing the test
// after Hang with what it waited for. For a condition with no event to
// wait on (a file another process writes, a process ending).
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not in %v", what, Hang)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
