package automations

import (
	"context"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Several hosts may declare one automation (a cluster's config file), and
// Options.Scheduling says which runs its schedules. A lease alone cannot
// make an occurrence run exactly once: while it moves, the host giving it
// up may stop before the due time and the one taking it start after, so
// nobody runs the occurrence; or both believe they hold it, and both run
// it. Options.Claim closes both gaps. Before a scheduled run starts, its
// occurrence (owner, automation, trigger, time) is claimed on a store the
// hosts share, and the run starts only on the host that won. A host that
// let an occurrence pass because another held the schedules keeps it, and
// claims it if it takes the schedules over within handoverWindow: won, the
// other never ran it; lost, it did.

// Occurrence names one schedule occurrence of one automation: what a
// claim is for.
type Occurrence struct {
	Owner      string
	Automation protocol.URI
	Trigger    string
	At         time.Time
}

const (
	// handoverWindow is how long after its time an occurrence another
	// host was to run is still claimed here when this host takes the
	// schedules over: longer than the schedules' lease takes to move.
	handoverWindow = 2 * time.Minute
	// claimRetry is how often the scheduler looks again while it holds an
	// occurrence it may have to claim (the schedules may have come here;
	// a claim may have failed to reach the store).
	claimRetry = time.Second
	// claimTimeout bounds one claim.
	claimTimeout = 10 * time.Second
)

// claim is an occurrence waiting for Options.Claim's answer.
type claim struct {
	a       *automation
	occ     Occurrence
	catchUp bool
}

// offerLocked is a schedule occurrence come due: it runs here, is
// claimed first, or passes, as the options say.
func (e *Engine) offerLocked(a *automation, id string, at time.Time, catchUp bool) {
	if e.opts.Scheduling != nil && !e.opts.Scheduling() {
		e.log.Debug("automations: a schedule occurrence passes here: another host runs the schedules", "automation", a.rec.Resource, "trigger", id, "at", at)
		if e.opts.Claim != nil {
			a.hold(id, at) // another host's to run; ours if it comes here soon
		}
		return
	}
	if e.opts.Claim == nil {
		e.fireScheduledLocked(a, id, at, catchUp)
		return
	}
	delete(a.passed, id)
	e.claims = append(e.claims, claim{a: a, occ: Occurrence{Owner: a.rec.Owner, Automation: a.rec.Resource, Trigger: id, At: at}, catchUp: catchUp})
}

// maxHeld bounds the occurrences of one trigger held to claim: an
// every-second schedule over the handover window holds them all.
const maxHeld = 256

// hold keeps an occurrence that did not run here, to claim later: every
// one a handover lets pass, in order, so that none is lost when several
// came due while the schedules moved.
func (a *automation) hold(id string, at time.Time) {
	if a.passed == nil {
		a.passed = map[string][]time.Time{}
	}
	held := a.passed[id]
	if n := len(held); n > 0 && !at.After(held[n-1]) {
		return // held already (a failed claim held again)
	}
	if len(held) == maxHeld {
		held = held[1:]
	}
	a.passed[id] = append(held, at)
}

// retryPassedLocked offers again the occurrences a's trigger id let pass,
// oldest first, once this host runs the schedules; those too old are
// forgotten.
func (e *Engine) retryPassedLocked(a *automation, id string, now time.Time) {
	held := a.passed[id]
	for len(held) > 0 && now.Sub(held[0]) > handoverWindow {
		// Another host's, which ran it or was down (its restart's
		// misfire policy says what then), or unclaimable all this while.
		e.log.Debug("automations: no longer claiming a schedule occurrence", "automation", a.rec.Resource, "trigger", id, "at", held[0])
		held = held[1:]
	}
	if len(held) == 0 {
		delete(a.passed, id)
		return
	}
	a.passed[id] = held
	if e.opts.Scheduling == nil || e.opts.Scheduling() {
		delete(a.passed, id)
		for _, at := range held {
			e.log.Info("automations: claiming an occurrence another host was to run", "automation", a.rec.Resource, "trigger", id, "at", at)
			e.offerLocked(a, id, at, false)
		}
	}
}

// runClaims asks Options.Claim for each waiting occurrence, holding none
// of the engine's locks (a claim is a round trip to the shared store),
// and starts the runs won. One whose claim failed is held to try again.
// It reports whether any is held so.
func (e *Engine) runClaims() (retry bool) {
	e.mu.Lock()
	claims := e.claims
	e.claims = nil
	e.unlock()
	for _, c := range claims {
		ctx, cancel := context.WithTimeout(e.ctx, claimTimeout)
		won, err := e.opts.Claim(ctx, c.occ)
		cancel()
		e.mu.Lock()
		a := e.autos[key{c.occ.Owner, c.occ.Automation}]
		switch {
		case a != c.a || e.closing:
			// Removed or replaced meanwhile, or stopping: nothing to run.
		case err != nil:
			e.log.Warn("automations: could not claim a schedule occurrence; trying again", "automation", c.occ.Automation, "trigger", c.occ.Trigger, "at", c.occ.At, "err", err)
			a.hold(c.occ.Trigger, c.occ.At)
			retry = true
		case !won:
			e.log.Debug("automations: another host claimed a schedule occurrence", "automation", c.occ.Automation, "trigger", c.occ.Trigger, "at", c.occ.At)
		case a.rec.Definition.Enabled:
			e.fireScheduledLocked(a, c.occ.Trigger, c.occ.At, c.catchUp)
		}
		e.unlock()
	}
	return retry
}
