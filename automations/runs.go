package automations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ahpd/ahpd/protocol"
)

// maxRequestID bounds runAutomation's idempotency key.
const maxRequestID = 200

// maxErrorMessage bounds the error a failed run shows.
const maxErrorMessage = 2000

// Run starts a manual run of owner's automation at uri. A retry with the
// same requestID returns the run the first made. Manual runs do not need
// the automation to be enabled.
func (e *Engine) Run(owner string, uri protocol.URI, requestID string) (protocol.URI, error) {
	if requestID == "" || len(requestID) > maxRequestID {
		return "", invalid("requestId must be 1 to %d bytes", maxRequestID)
	}
	e.mu.Lock()
	defer e.unlock()
	a, ok := e.autos[key{owner, uri}]
	if !ok {
		return "", fmt.Errorf("%w: no automation %s", ErrNotFound, protocol.Quote(uri))
	}
	for _, rr := range a.rec.Runs {
		if rr.RequestID == requestID {
			return rr.State.Resource, nil
		}
	}
	if e.closing {
		return "", fmt.Errorf("ahpd is shutting down")
	}
	if n := e.activeOfLocked(a); n >= e.opts.MaxActive {
		return "", invalid("automation %s has %d runs in progress, the most it may; wait for one to end or cancel one", protocol.Quote(uri), n)
	}
	return e.admitLocked(a, &protocol.AutomationManualRunOrigin{}, requestID, 0), nil
}

// CancelRun cancels owner's run at run: its turn is cancelled, and the
// run ends cancelled (unless it completes or fails first).
func (e *Engine) CancelRun(owner string, run protocol.URI) error {
	e.mu.Lock()
	defer e.unlock()
	k, ok := e.runs[run]
	if !ok || k.owner != owner {
		return fmt.Errorf("%w: no automation run %s", ErrNotFound, protocol.Quote(run))
	}
	ac := e.active[run]
	if ac == nil {
		return invalid("run %s has already ended", protocol.Quote(run))
	}
	ac.cancelRequested = true
	ac.cancel()
	return nil
}

// RunState returns owner's run at run.
func (e *Engine) RunState(owner string, run protocol.URI) (protocol.AutomationRunState, error) {
	e.mu.Lock()
	defer e.unlock()
	rr := e.runLocked(owner, run)
	if rr == nil {
		return protocol.AutomationRunState{}, fmt.Errorf("%w: no automation run %s", ErrNotFound, protocol.Quote(run))
	}
	return rr.State, nil
}

// RunOwner returns who a run belongs to, for a host routing a run channel.
func (e *Engine) RunOwner(run protocol.URI) (string, bool) {
	e.mu.Lock()
	defer e.unlock()
	k, ok := e.runs[run]
	return k.owner, ok
}

func (e *Engine) runLocked(owner string, run protocol.URI) *runRecord {
	k, ok := e.runs[run]
	if !ok || k.owner != owner {
		return nil
	}
	a := e.autos[k]
	if a == nil {
		return nil
	}
	for i := range a.rec.Runs {
		if a.rec.Runs[i].State.Resource == run {
			return &a.rec.Runs[i]
		}
	}
	return nil
}

func (e *Engine) activeOfLocked(a *automation) int {
	n := 0
	for _, rr := range a.rec.Runs {
		if e.active[rr.State.Resource] != nil {
			n++
		}
	}
	return n
}

// Event takes something that happened and starts a run of every enabled
// automation with an event trigger matching it.
func (e *Engine) Event(ev Event) {
	e.mu.Lock()
	defer e.unlock()
	if e.closing {
		return
	}
	depth := 1
	from := protocol.URI("")
	if ev.Run != "" {
		if k, ok := e.runs[ev.Run]; ok {
			from = k.uri
			if rr := e.runLocked(k.owner, ev.Run); rr != nil {
				depth = rr.Depth + 1
			}
		}
	}
	runOf := func(protocol.URI) protocol.URI { return from }
	for _, k := range e.sortedKeysLocked() {
		a := e.autos[k]
		if !a.rec.Definition.Enabled || (ev.Type == TriggerSession && k.owner != ev.Owner) {
			continue
		}
		for _, t := range a.c.def.Triggers {
			et, ok := t.(*protocol.AutomationEventTrigger)
			if !ok || a.watchBroken(et.ID) || !matches(et, k.uri, ev, runOf) {
				continue // a trigger whose watch is broken fires for nothing, also on what another's watch sees
			}
			if depth > MaxChain {
				e.log.Warn("automations: an event chain reached its bound; not starting another run", "automation", k.uri, "bound", MaxChain)
				break
			}
			origin := &protocol.AutomationTriggeredRunOrigin{TriggerID: et.ID, Event: ev.provenance()}
			e.fireLocked(a, origin, depth)
			break // one run per automation per event
		}
	}
}

// fireScheduledLocked starts a run for schedule trigger id's occurrence
// at, which this host is to run (offerLocked decides).
func (e *Engine) fireScheduledLocked(a *automation, id string, at time.Time, catchUp bool) {
	origin := &protocol.AutomationTriggeredRunOrigin{TriggerID: id}
	s := stamp(at)
	origin.ScheduledFor = &s
	if catchUp {
		t := true
		origin.CatchUp = &t
	}
	e.fireLocked(a, origin, 0)
}

// fireLocked starts an automatic run, counting it against afterRuns.
func (e *Engine) fireLocked(a *automation, origin *protocol.AutomationTriggeredRunOrigin, depth int) {
	if n := e.activeOfLocked(a); n >= e.opts.MaxActive {
		e.log.Warn("automations: a trigger fired while the automation has as many runs in progress as it may; skipped", "automation", a.rec.Resource, "trigger", origin.TriggerID, "active", n)
		e.saveLocked(a)
		return
	}
	if a.c.afterRuns > 0 {
		a.rec.RunCount++
		if a.rec.RunCount >= a.c.afterRuns {
			e.disableLocked(a, "it has made the runs its afterRuns condition allows")
		}
	}
	e.admitLocked(a, origin, "", depth)
}

// disableLocked turns a's triggers off, saying why.
func (e *Engine) disableLocked(a *automation, why string) {
	a.rec.Definition.Enabled = false
	a.c.def.Enabled = false
	a.rec.ModifiedAt = stamp(e.clock.Now())
	e.log.Info("automations: disabled an automation", "automation", a.rec.Resource, "why", why)
}

// admitLocked records a new pending run of a, keeps and publishes it, and
// sets it going.
func (e *Engine) admitLocked(a *automation, origin protocol.AutomationRunOrigin, requestID string, depth int) protocol.URI {
	now := e.clock.Now()
	uri := RunScheme + ":/" + newID()
	rr := runRecord{
		State: protocol.AutomationRunState{
			Resource: uri, Automation: a.rec.Resource, Origin: origin,
			Lifecycle: &protocol.AutomationPendingRunLifecycle{CreatedAt: stamp(now)},
			Sessions:  []protocol.URI{},
		},
		RequestID: requestID, Depth: depth,
	}
	a.rec.Runs = append([]runRecord{rr}, a.rec.Runs...)
	k := key{a.rec.Owner, a.rec.Resource}
	e.runs[uri] = k
	ctx, cancel := context.WithCancel(context.Background())
	e.active[uri] = &active{cancel: cancel}
	e.saveLocked(a) // the run is kept before anything of it happens
	state := rr.State
	e.emitLocked(Change{Owner: k.owner, Run: &state})
	e.emitEntryLocked(a)
	req := RunRequest{
		Owner: k.owner, Automation: k.uri, Run: uri, Definition: a.rec.Definition,
		SessionCreated: func(s protocol.URI) { e.sessionCreated(k, uri, s) },
	}
	e.wg.Add(1)
	go e.execute(ctx, k, uri, req)
	return uri
}

// errNoRunner is the outcome of a run with no Runner to run it.
var errNoRunner = errors.New("this ahpd has no runner for automations")

func (e *Engine) execute(ctx context.Context, k key, uri protocol.URI, req RunRequest) {
	defer e.wg.Done()
	out := Outcome{Err: errNoRunner}
	if e.opts.Runner != nil {
		out = e.opts.Runner.Run(ctx, req)
	}
	e.finish(k, uri, out)
}

// sessionCreated records a run's session and marks the run running.
func (e *Engine) sessionCreated(k key, uri, session protocol.URI) {
	e.mu.Lock()
	defer e.unlock()
	a := e.autos[k]
	rr := e.runLocked(k.owner, uri)
	if a == nil || rr == nil || terminal(rr.State.Lifecycle) {
		return
	}
	st := &rr.State
	var acts []protocol.Action
	if !slices.Contains(st.Sessions, session) {
		st.Sessions = append(slices.Clip(st.Sessions), session)
		acts = append(acts, &protocol.AutomationRunSessionSetAction{Session: session})
	}
	if st.PrimarySession == nil {
		s := session
		st.PrimarySession = &s
		acts = append(acts, &protocol.AutomationRunPrimarySessionChangedAction{PrimarySession: &s})
	}
	if p, ok := st.Lifecycle.(*protocol.AutomationPendingRunLifecycle); ok {
		st.Lifecycle = &protocol.AutomationRunningRunLifecycle{CreatedAt: p.CreatedAt, StartedAt: stamp(e.clock.Now())}
		acts = append(acts, &protocol.AutomationRunLifecycleChangedAction{Lifecycle: st.Lifecycle})
	}
	e.saveLocked(a) // the session is kept before its message goes
	for _, act := range acts {
		state := *st
		e.emitLocked(Change{Owner: k.owner, Run: &state, Action: act})
	}
	e.emitEntryLocked(a)
}

// finish ends a run as its outcome says, and trims the history.
func (e *Engine) finish(k key, uri protocol.URI, out Outcome) {
	e.mu.Lock()
	defer e.unlock()
	ac := e.active[uri]
	delete(e.active, uri)
	if ac != nil {
		ac.cancel()
	}
	a := e.autos[k]
	rr := e.runLocked(k.owner, uri)
	if a == nil || rr == nil {
		return // removed while it ran
	}
	now := e.clock.Now()
	created, started := lifecycleTimes(rr.State.Lifecycle)
	var lc protocol.AutomationRunLifecycle
	switch {
	case out.Err == nil:
		if started == nil {
			s := stamp(now)
			started = &s
		}
		lc = &protocol.AutomationCompletedRunLifecycle{CreatedAt: created, StartedAt: *started, CompletedAt: stamp(now), Usage: out.Usage}
	case ac != nil && ac.cancelRequested:
		lc = &protocol.AutomationCancelledRunLifecycle{CreatedAt: created, StartedAt: started, CompletedAt: stamp(now)}
	case e.closing:
		lc = failedLifecycle(rr.State.Lifecycle, now, "ahpd stopped before the run ended")
	default:
		lc = failedLifecycle(rr.State.Lifecycle, now, out.Err.Error())
	}
	rr.State.Lifecycle = lc
	e.log.Info("automations: a run ended", "automation", k.uri, "run", uri, "outcome", StateOf(lc), "err", out.Err)
	state := rr.State
	e.pruneLocked(a)
	e.saveLocked(a)
	e.emitLocked(Change{Owner: k.owner, Run: &state, Action: &protocol.AutomationRunLifecycleChangedAction{Lifecycle: lc}})
	e.emitEntryLocked(a)
}

// pruneLocked keeps at most HistoryLimit ended runs of a, the newest;
// runs in progress are never dropped.
func (e *Engine) pruneLocked(a *automation) {
	ended := 0
	kept := a.rec.Runs[:0]
	for _, rr := range a.rec.Runs {
		if terminal(rr.State.Lifecycle) {
			ended++
			if ended > e.opts.HistoryLimit {
				delete(e.runs, rr.State.Resource)
				continue
			}
		}
		kept = append(kept, rr)
	}
	clear(a.rec.Runs[len(kept):])
	a.rec.Runs = kept
}

// StateOf names a run's state as people read it: pending, running,
// completed, failed or cancelled ("unknown" for a lifecycle of a newer
// protocol).
func StateOf(lc protocol.AutomationRunLifecycle) string {
	switch lc.(type) {
	case *protocol.AutomationPendingRunLifecycle:
		return "pending"
	case *protocol.AutomationRunningRunLifecycle:
		return "running"
	case *protocol.AutomationCompletedRunLifecycle:
		return "completed"
	case *protocol.AutomationFailedRunLifecycle:
		return "failed"
	case *protocol.AutomationCancelledRunLifecycle:
		return "cancelled"
	}
	return "unknown"
}

func terminal(lc protocol.AutomationRunLifecycle) bool {
	switch lc.(type) {
	case *protocol.AutomationCompletedRunLifecycle, *protocol.AutomationFailedRunLifecycle, *protocol.AutomationCancelledRunLifecycle:
		return true
	}
	return false
}

func lifecycleTimes(lc protocol.AutomationRunLifecycle) (created string, started *string) {
	switch lc := lc.(type) {
	case *protocol.AutomationPendingRunLifecycle:
		return lc.CreatedAt, nil
	case *protocol.AutomationRunningRunLifecycle:
		s := lc.StartedAt
		return lc.CreatedAt, &s
	case *protocol.AutomationCompletedRunLifecycle:
		s := lc.StartedAt
		return lc.CreatedAt, &s
	case *protocol.AutomationFailedRunLifecycle:
		return lc.CreatedAt, lc.StartedAt
	case *protocol.AutomationCancelledRunLifecycle:
		return lc.CreatedAt, lc.StartedAt
	}
	return "", nil
}

func failedLifecycle(prev protocol.AutomationRunLifecycle, now time.Time, msg string) *protocol.AutomationFailedRunLifecycle {
	created, started := lifecycleTimes(prev)
	if created == "" {
		created = stamp(now)
	}
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "…"
	}
	return &protocol.AutomationFailedRunLifecycle{
		CreatedAt: created, StartedAt: started, CompletedAt: stamp(now),
		Error: protocol.ErrorInfo{ErrorType: "automationRunFailed", Message: msg},
	}
}
