package automations

import (
	"slices"
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// loop is the scheduler: it waits for the earliest thing due (a schedule
// occurrence, an afterDate), or a change of definitions, and fires what
// has come due: one pass per wake, so a claim is asked once a wake.
func (e *Engine) loop() {
	defer e.wg.Done()
	next := e.pass()
	for {
		var due <-chan time.Time
		stop := func() {}
		if !next.IsZero() {
			due, stop = e.clock.At(next)
		}
		var ack chan struct{}
		select {
		case <-due:
		case <-e.wake:
		case ack = <-e.synced:
		case <-e.done:
			stop()
			return
		}
		stop()
		next = e.pass()
		if ack != nil {
			close(ack)
		}
	}
}

// pass fires what is due by now, claims first where Options.Claim says
// so, and returns when to look again (zero: nothing scheduled).
func (e *Engine) pass() time.Time {
	e.mu.Lock()
	now := e.clock.Now()
	next := e.tickLocked(now)
	e.unlock()
	if e.runClaims() {
		if retry := now.Add(claimRetry); next.IsZero() || retry.Before(next) {
			next = retry
		}
	}
	return next
}

// tickLocked offers every schedule occurrence due by now (several missed
// at once run once, for the latest), and again one held for a claim,
// applies afterDate, and returns when to look again (zero: nothing
// scheduled).
func (e *Engine) tickLocked(now time.Time) time.Time {
	if e.closing {
		return time.Time{}
	}
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, k := range e.sortedKeysLocked() {
		a := e.autos[k]
		if !a.rec.Definition.Enabled {
			continue
		}
		if !a.c.afterDate.IsZero() && !now.Before(a.c.afterDate) {
			e.disableLocked(a, "its afterDate has passed")
			e.saveLocked(a)
			e.emitEntryLocked(a)
			continue
		}
		for _, t := range a.c.def.Triggers {
			st, ok := t.(*protocol.AutomationScheduleTrigger)
			if !ok || !a.rec.Definition.Enabled {
				continue
			}
			s := a.c.schedules[st.ID]
			// One let pass is offered first: the schedules may have come
			// here just as the next occurrence is due, and it is older.
			e.retryPassedLocked(a, st.ID, now)
			last := a.rec.LastFire[st.ID]
			due := s.Next(last)
			if !due.IsZero() && !due.After(now) {
				at := s.Latest(last, now)
				a.rec.LastFire[st.ID] = at
				e.offerLocked(a, st.ID, at, false)
				due = s.Next(at)
			}
			if a.rec.Definition.Enabled {
				earliest(due)
				if len(a.passed[st.ID]) > 0 {
					earliest(now.Add(claimRetry)) // the schedules may come here
				}
			}
		}
		if a.rec.Definition.Enabled {
			earliest(a.c.afterDate)
		}
	}
	return next
}

// settle returns once the scheduler has made a pass at the clock's
// present time: what was due by now has been fired.
func (e *Engine) settle() {
	ack := make(chan struct{})
	select {
	case e.synced <- ack:
		<-ack
	case <-e.done:
	}
}

func (e *Engine) sortedKeysLocked() []key {
	ks := make([]key, 0, len(e.autos))
	for k := range e.autos {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b key) int {
		if c := strings.Compare(a.owner, b.owner); c != 0 {
			return c
		}
		return strings.Compare(a.uri, b.uri)
	})
	return ks
}
