package host

import (
	"context"
	"runtime"
	"sync"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// Reads of the journal on a reader's behalf (ahpd/sessionEvents,
// ahpd/replaySession) are budgeted, so that readers cannot starve the
// sessions' writers: the host runs at most as many at once as it has
// cores, the rest waiting their turn, and one person (a user; root is the
// host's own) has at most readsPerPerson running or waiting, the next
// refused with a reason to wait for one.

const readsPerPerson = 4

type journalReads struct {
	size  int // the reads the host runs at once; 0: as many as it has cores, at least 2
	once  sync.Once
	slots chan struct{}

	mu  sync.Mutex
	per map[grants.Principal]int
}

// begin takes a read of p's, waiting for a slot; release ends it.
func (r *journalReads) begin(ctx context.Context, p grants.Principal, method string) (release func(), err error) {
	r.once.Do(func() {
		if r.size <= 0 {
			r.size = max(2, runtime.GOMAXPROCS(0))
		}
		r.slots = make(chan struct{}, r.size)
	})
	counted := p.Kind == grants.KindUser
	if counted {
		r.mu.Lock()
		if r.per == nil {
			r.per = map[grants.Principal]int{}
		}
		if r.per[p] >= readsPerPerson {
			r.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeInvalidRequest, "%s: %s has %d reads of the journal running, the most one person may at once: send it again once one has answered", method, p, readsPerPerson)
		}
		r.per[p]++
		r.mu.Unlock()
	}
	done := func() {
		if counted {
			r.mu.Lock()
			if r.per[p]--; r.per[p] <= 0 {
				delete(r.per, p)
			}
			r.mu.Unlock()
		}
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	return func() { <-r.slots; done() }, nil
}
