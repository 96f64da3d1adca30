package cluster

import (
	"sync"
	"time"
)

// maxSeen bounds the sessions whose last known host a member remembers;
// past it, it forgets them all and learns again.
const maxSeen = 100_000

// seenHolders remembers the host last known to run each session: the
// holder a read of its lease named, or the host that last wrote its
// record (a host writes the records of the sessions it runs). Holder
// answers with it when the leases' bucket cannot answer (its leader died
// with its node, a new one not yet elected): the caller then asks that
// host, which answers if it still runs the session, and does not if it
// died, which is what the caller has to tell its client in either case.
type seenHolders struct {
	mu sync.Mutex
	by map[string]string // host id by session
}

func (s *seenHolders) note(session, host string) {
	if host == "" || host == "?" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil || len(s.by) >= maxSeen {
		s.by = map[string]string{}
	}
	s.by[session] = host
}

func (s *seenHolders) forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, session)
}

func (s *seenHolders) get(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[session]
}

// LeaseTTL is how long a lease lives without a renewal: how long a
// session whose holder could not release it waits for another host.
func (m *Member) LeaseTTL() time.Duration { return m.cfg.LeaseTTL }
