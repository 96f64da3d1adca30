package host

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/ahpd/ahpd/grants"
)

// Budgets: what one person may hold open on this host at once, so that
// nobody can starve the others of connections. Each person (a user of
// the directory) has ConnectionsPerPerson WebSocket connections; root,
// which is the host itself or everybody on a host without users, and the
// host's own in-process connections (the HTTP API's, the dashboard's,
// which budget their own streams) are not counted. A connection past the
// budget is refused before the upgrade with HTTP 429 and Retry-After.

// defaultConnectionsPerPerson is Options.ConnectionsPerPerson's default:
// a person with a dozen VS Code windows and a few scripts never meets it.
const defaultConnectionsPerPerson = 64

// budgetRetryAfter is the Retry-After of a refusal, in seconds: a
// connection of the person's may close any moment.
const budgetRetryAfter = 5

// personSlots counts each person's open connections. Its lock is its own,
// held only to count.
type personSlots struct {
	mu     sync.Mutex
	held   map[grants.Principal]int
	warned map[grants.Principal]bool // refused since their count last fell
}

// take counts a connection of who's, or reports false (and whether to say
// so in the log: once until their count falls) when they hold max.
func (s *personSlots) take(who grants.Principal, max int) (ok, warn bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held, s.warned = map[grants.Principal]int{}, map[grants.Principal]bool{}
	}
	if s.held[who] >= max {
		warn = !s.warned[who]
		s.warned[who] = true
		return false, warn
	}
	s.held[who]++
	return true, false
}

// give lets a connection of who's go.
func (s *personSlots) give(who grants.Principal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[who]--; s.held[who] <= 0 {
		delete(s.held, who)
	}
	delete(s.warned, who)
}

// connectionSlot takes a connection of p's from their budget, or answers
// w with the refusal and reports false; release gives it back.
func (h *Host) connectionSlot(w http.ResponseWriter, p grants.Principal) (release func(), ok bool) {
	if p.Kind != grants.KindUser {
		return func() {}, true
	}
	max := h.opts.ConnectionsPerPerson
	ok, warn := h.slots.take(p, max)
	if !ok {
		h.metrics.budgetRefused.Add(1)
		if warn {
			h.log.Warn("refused a connection past its person's budget", "principal", p.String(), "budget", max)
		}
		w.Header().Set("Retry-After", strconv.Itoa(budgetRetryAfter))
		http.Error(w, p.String()+" has "+strconv.Itoa(max)+" connections open, the most one person may: close one, or ask whoever runs the host to raise budgets.connections", http.StatusTooManyRequests)
		return nil, false
	}
	return func() { h.slots.give(p) }, true
}
