package host

import (
	"context"
	"sync"
)

// appendGate bounds how much the host has sent its journal and not yet
// had acknowledged, and lets a small append past large ones.
//
// The journal's server takes a stream's messages one after another, so
// an append waits for every message sent before it. Unbounded, 50
// sessions streaming flat out keep some 50,000 entries in flight (an
// append of up to journal.MaxBatch each), and a quiet session's one
// action waits half a second behind them (docs/JOURNAL.md, "Sessions
// apart"). Bounded, the server still always has work queued (an
// append's acks come back in well under the time the server takes for
// the rest), and an append waits for at most the bound's worth.
//
// Large appends (a session that fell behind, writing its backlog) share
// gateLarge of the bound, first come first served; small ones (a client's
// action, an agent's few deltas) may use all of it and go before any
// large one waiting, so a quiet session never queues behind a busy one.
type appendGate struct {
	mu    sync.Mutex
	used  int
	small []*gateWait
	large []*gateWait
}

const (
	gateBound = 2048       // entries in flight, host-wide
	gateLarge = 2048 - 256 // of which large appends may hold
	gateSmall = 64         // an append of at most this many is small
)

type gateWait struct {
	cost  int
	ready chan struct{}
}

// gateCost is what an append of n entries of size bytes counts for: its
// entries, and a large entry's bytes as the entries of their size.
func gateCost(n int, size int64) int {
	return min(gateBound, n+int(size/8192))
}

// acquire waits for room for an append of cost, and fails only when ctx
// ends first.
func (g *appendGate) acquire(ctx context.Context, cost int) error {
	small := cost <= gateSmall
	g.mu.Lock()
	if g.fitsLocked(cost, small) && (len(g.small) == 0 && (small || len(g.large) == 0)) {
		g.used += cost
		g.mu.Unlock()
		return nil
	}
	w := &gateWait{cost: cost, ready: make(chan struct{})}
	if small {
		g.small = append(g.small, w)
	} else {
		g.large = append(g.large, w)
	}
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: given back
		g.used -= cost
		g.grantLocked()
	default:
		g.small = removeWait(g.small, w)
		g.large = removeWait(g.large, w)
	}
	return ctx.Err()
}

// release gives back an append's room.
func (g *appendGate) release(cost int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= cost
	g.grantLocked()
}

func (g *appendGate) fitsLocked(cost int, small bool) bool {
	if small {
		return g.used+cost <= gateBound
	}
	// A large append alone always goes, whatever its cost.
	return g.used == 0 || g.used+cost <= gateLarge
}

// grantLocked lets the waiting appends that fit go: small ones first, then
// large ones in their order.
func (g *appendGate) grantLocked() {
	for len(g.small) > 0 && g.fitsLocked(g.small[0].cost, true) {
		g.used += g.small[0].cost
		close(g.small[0].ready)
		g.small = g.small[1:]
	}
	if len(g.small) > 0 {
		return
	}
	for len(g.large) > 0 && g.fitsLocked(g.large[0].cost, false) {
		g.used += g.large[0].cost
		close(g.large[0].ready)
		g.large = g.large[1:]
	}
}

func removeWait(ws []*gateWait, w *gateWait) []*gateWait {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}
