package host

import (
	"context"
	"runtime"
	"testing"
)

// granted reports whether a wait for the gate has ended.
func granted(ch <-chan error) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitFor starts an acquire of cost on a goroutine of its own, and
// returns when it is queued (or granted): its result comes on the
// channel.
func waitFor(t *testing.T, g *appendGate, ctx context.Context, cost int) <-chan error {
	t.Helper()
	g.mu.Lock()
	queued := len(g.small) + len(g.large)
	used := g.used
	g.mu.Unlock()
	ch := make(chan error, 1)
	go func() { ch <- g.acquire(ctx, cost) }()
	for {
		g.mu.Lock()
		moved := len(g.small)+len(g.large) != queued || g.used != used
		g.mu.Unlock()
		if moved {
			return ch
		}
		runtime.Gosched()
	}
}

// TestAppendGate: large appends share part of the bound in their order,
// a small one goes past them into the rest, and first when room comes.
func TestAppendGate(t *testing.T) {
	var g appendGate
	ctx := context.Background()
	must := func(cost int) {
		t.Helper()
		if err := g.acquire(ctx, cost); err != nil {
			t.Fatal(err)
		}
	}
	must(1024)
	must(700) // 1,724 of gateLarge's 1,792
	large := waitFor(t, &g, ctx, 1024)
	must(10) // small: into the room kept for small ones, past the large one waiting
	for range 4 {
		must(gateSmall) // 1,990
	}
	small := waitFor(t, &g, ctx, gateSmall) // past the whole bound: waits
	if g.used != 1990 || granted(large) || granted(small) {
		t.Fatalf("%d in flight; large granted %v, small %v", g.used, granted(large), granted(small))
	}
	g.release(1024)
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if granted(large) {
		t.Fatal("the large append went with the large share full")
	}
	g.release(700)
	if err := <-large; err != nil {
		t.Fatal(err)
	}
	if want := 10 + 5*gateSmall + 1024; g.used != want {
		t.Errorf("%d in flight, want %d", g.used, want)
	}
}

// TestAppendGateGivenUp: a wait whose context ends takes nothing.
func TestAppendGateGivenUp(t *testing.T) {
	var g appendGate
	if err := g.acquire(context.Background(), gateBound); err != nil {
		t.Fatal(err) // a large one alone goes, whatever its cost
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := waitFor(t, &g, ctx, 1)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a wait given up was granted")
	}
	g.release(gateBound)
	if g.used != 0 || len(g.small)+len(g.large) != 0 {
		t.Errorf("%d in flight and %d waiting after the release", g.used, len(g.small)+len(g.large))
	}
}
