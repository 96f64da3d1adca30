package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// AutomationOptions configure the host's automations (package
// automations): the host serves their catalogue and run channels, the
// commands, and runs them as their owners.
type AutomationOptions struct {
	// Clock drives schedules; nil is the host's (Options.Clock). Tests
	// move a fake one.
	Clock automations.Clock
	// Declared are the automations the config file declares.
	Declared []automations.Declared
	// HistoryLimit is how many ended runs each automation keeps; 0 is
	// automations.DefaultHistoryLimit.
	HistoryLimit int
	// Debounce is how long a file must be left alone before its changes
	// make one file-changed event; 0 is automations.DefaultDebounce.
	Debounce time.Duration
	// MaxPerOwner is how many automations one person may have
	// (automations.Options.MaxPerOwner); 0 is
	// automations.DefaultMaxPerOwner.
	MaxPerOwner int
	// WatchBudget is how many folders the file and git ref triggers of
	// everyone on the host may watch together, and WatchShare how many
	// one person's may (automations.Options.WatchBudget, WatchShare); 0
	// is automations.DefaultWatchBudget, DefaultWatchShare.
	WatchBudget, WatchShare int
	// NewRunner makes the runner of the runs from what it is given of the
	// host (package asowner's runs them as their owners); nil refuses
	// every run, saying the host runs none.
	NewRunner func(RunnerHost) automations.Runner
}

// RunnerHost is what the runner of automation runs is given of the host.
type RunnerHost interface {
	// Connect opens a connection acting for cred (Host.Connect).
	Connect(cred grants.Credential) (io.ReadWriteCloser, error)
	// Root is who a run without an owner acts for.
	Root() grants.Principal
	// Now is the host's time.
	Now() time.Time
}

// runnerHost is the host as its runner sees it.
type runnerHost struct{ h *Host }

func (r runnerHost) Connect(cred grants.Credential) (io.ReadWriteCloser, error) {
	return r.h.Connect(cred)
}
func (r runnerHost) Root() grants.Principal { return r.h.opts.Auth.Root() }
func (r runnerHost) Now() time.Time         { return r.h.now() }

// noRunner refuses every run: a host made without a runner.
type noRunner struct{}

func (noRunner) Run(context.Context, automations.RunRequest) automations.Outcome {
	return automations.Outcome{Err: errors.New("this host runs no automations: it was made without a runner (host.AutomationOptions.NewRunner)")}
}

// automationHost is the host's side of the automations engine.
type automationHost struct {
	e *automations.Engine

	mu    lockcheck.Mutex
	runOf map[string]protocol.URI // session URI -> the run that made it
}

// openAutomations opens the engine, keeping automations beside the
// sessions (nothing kept with the memory store).
func (h *Host) openAutomations() error {
	dir := ""
	if h.opts.Sessions != "memory" && h.opts.StateDir != "" {
		dir = filepath.Join(h.opts.StateDir, "automations")
	}
	ah := &automationHost{mu: lockcheck.Mutex{Class: "automations"}, runOf: map[string]protocol.URI{}}
	h.autos = ah
	var scheduling func() bool
	var claim func(context.Context, automations.Occurrence) (bool, error)
	if h.cluster != nil {
		scheduling = h.cluster.Scheduling // one host of the cluster runs the schedules
		if h.opts.Journal != nil {
			claim = h.claimOccurrence // and each occurrence runs on one, across a handover
		}
	}
	var runner automations.Runner = noRunner{}
	if n := h.opts.Automations.NewRunner; n != nil {
		runner = n(runnerHost{h})
	}
	e, err := automations.Open(automations.Options{
		Dir: dir, Clock: cmp.Or[automations.Clock](h.opts.Automations.Clock, h.opts.Clock), Runner: runner,
		OnChange: h.automationChanged, HistoryLimit: h.opts.Automations.HistoryLimit, Debounce: h.opts.Automations.Debounce,
		Logger: h.log.With("part", "automations"), Scheduling: scheduling, Claim: claim,
		MaxPerOwner: h.opts.Automations.MaxPerOwner, WatchBudget: h.opts.Automations.WatchBudget, WatchShare: h.opts.Automations.WatchShare,
	})
	if err != nil {
		return fmt.Errorf("host: automations: %w", err)
	}
	ah.e = e
	if err := e.SetDeclared(h.opts.Automations.Declared); err != nil {
		_ = e.Close()
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// scheduleNotes is the journal's note set of the schedules' occurrences
// claimed: one note a schedule trigger, raised to each occurrence's time
// by the host that runs it.
const scheduleNotes = "schedules"

// claimOccurrence claims a schedule occurrence for this host across the
// cluster (automations.Options.Claim): won when no host claimed it, or a
// later one of the trigger, before.
func (h *Host) claimOccurrence(ctx context.Context, o automations.Occurrence) (bool, error) {
	sum := sha256.Sum256([]byte(o.Owner + "\x00" + string(o.Automation) + "\x00" + o.Trigger))
	return h.opts.Journal.RaiseNote(ctx, scheduleNotes, hex.EncodeToString(sum[:16]), o.At.UnixMicro(), h.hostName())
}

// closeAutomations stops the scheduler and the runs in progress.
func (h *Host) closeAutomations() {
	if h.autos != nil && h.autos.e != nil {
		_ = h.autos.e.Close()
	}
}

// automationCapabilities is what initialize says of automations.
func (h *Host) automationCapabilities() *protocol.AutomationCapabilities {
	limit := int64(h.opts.Automations.HistoryLimit)
	if limit <= 0 {
		limit = automations.DefaultHistoryLimit
	}
	return &protocol.AutomationCapabilities{
		Create:          &protocol.AutomationCreateCapability{},
		Schedules:       &protocol.AutomationScheduleCapabilities{},
		RunCancellation: &protocol.AutomationRunCancellationCapability{},
		RunHistoryLimit: &limit,
	}
}

// automationOwner is whose automations a connection sees and makes.
func (h *Host) automationOwner(c *conn.Conn) string {
	return session.PrincipalString(h.directory().Owner(c.Principal()))
}

// isAutomationChannel reports whether a channel is the automation
// catalogue or a run.
func isAutomationChannel(channel string) bool {
	return channel == automations.CatalogueURI || strings.HasPrefix(channel, automations.RunScheme+":/")
}

// automationChanged publishes what the engine changed (told in order,
// holding none of the engine's locks). The catalogue is per owner: each
// change goes to the subscribers it belongs to.
func (h *Host) automationChanged(ch automations.Change) {
	mine := func(s fanout.Subscriber) bool { return h.automationOwner(s.(*conn.Conn)) == ch.Owner }
	switch {
	case ch.Entry != nil:
		h.bus.PublishTo(automations.CatalogueURI, &protocol.AutomationSetAction{Automation: *ch.Entry}, mine)
	case ch.Removed != "":
		h.bus.PublishTo(automations.CatalogueURI, &protocol.AutomationRemovedAction{Resource: ch.Removed}, mine)
	case ch.Run != nil && ch.Action != nil:
		if s, ok := ch.Action.(*protocol.AutomationRunSessionSetAction); ok {
			h.autos.mu.Lock()
			h.autos.runOf[s.Session] = ch.Run.Resource
			h.autos.mu.Unlock()
		}
		h.bus.PublishTo(ch.Run.Resource, ch.Action, mine)
		h.automationEvent(ch) // events.go
	}
}

// attachAutomation subscribes c to the catalogue or to one of its runs.
func (h *Host) attachAutomation(c *conn.Conn, channel, requestID string) (protocol.Snapshot, error) {
	if err := h.check(c, grants.SessionList, grants.Target{}); err != nil {
		return protocol.Snapshot{}, err
	}
	owner := h.automationOwner(c)
	var snap protocol.Snapshot
	if channel == automations.CatalogueURI {
		h.autos.e.Snapshot(owner, func(entries []protocol.AutomationEntry) {
			seq := h.bus.Subscribe(c, channel, requestID)
			snap = protocol.Snapshot{Resource: channel, State: &protocol.AutomationState{Entries: entries}, FromSeq: seq}
		})
		return snap, nil
	}
	err := h.autos.e.RunSnapshot(owner, channel, func(s protocol.AutomationRunState) {
		seq := h.bus.Subscribe(c, channel, requestID)
		snap = protocol.Snapshot{Resource: channel, State: &s, FromSeq: seq}
	})
	if err != nil {
		return protocol.Snapshot{}, protocol.Errorf(protocol.CodeNotFound, "no automation run %s", protocol.Quote(channel))
	}
	return snap, nil
}

// automationExists reports whether c may subscribe to an automation channel.
func (h *Host) automationExists(c *conn.Conn, channel string) bool {
	if channel == automations.CatalogueURI {
		return true
	}
	_, err := h.autos.e.RunState(h.automationOwner(c), channel)
	return err == nil
}

// dispatchAutomation takes a client's automation action: the engine does
// what it asks and publishes the result; the action is echoed to its
// sender, refused with the reason when it could not be done.
func (h *Host) dispatchAutomation(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin) {
	owner := h.automationOwner(c)
	var err error
	switch a := a.(type) {
	case *protocol.AutomationCreateRequestedAction:
		if channel != automations.CatalogueURI {
			break
		}
		if err = h.checkAutomationPlaces(c, a.Definition); err == nil {
			err = h.checkDefaultFor(a.Definition.Session)
		}
		if err == nil {
			_, err = h.autos.e.Create(owner, a.Resource, a.Definition)
		}
		h.echoAutomation(c, channel, a, origin, err)
		return
	case *protocol.AutomationUpdateRequestedAction:
		if channel != automations.CatalogueURI {
			break
		}
		var cur protocol.AutomationEntry
		if cur, err = h.autos.e.Entry(owner, a.Resource); err == nil {
			next := cur.Definition
			if a.Changes.Session != nil {
				next.Session = *a.Changes.Session
			}
			if a.Changes.Triggers != nil {
				next.Triggers = a.Changes.Triggers
			}
			if err = h.checkAutomationPlaces(c, next); err == nil && a.Changes.Session != nil {
				err = h.checkDefaultFor(next.Session)
			}
			if err == nil {
				_, err = h.autos.e.Update(owner, a.Resource, a.Changes)
			}
		}
		h.echoAutomation(c, channel, a, origin, err)
		return
	case *protocol.AutomationRemovedAction:
		if channel != automations.CatalogueURI {
			break
		}
		h.echoAutomation(c, channel, a, origin, h.autos.e.Remove(owner, a.Resource))
		return
	case *protocol.AutomationRunCancelRequestedAction:
		if channel == automations.CatalogueURI {
			break
		}
		h.echoAutomation(c, channel, a, origin, h.autos.e.CancelRun(owner, channel))
		return
	}
	h.refuse(c, channel, a, origin, fmt.Sprintf("%s does not belong on channel %s", a.Type(), channel))
}

func (h *Host) echoAutomation(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, err error) {
	if err != nil {
		h.refuse(c, channel, a, origin, err.Error())
		return
	}
	h.bus.Echo(c, channel, a, origin, "")
}

// checkAutomationPlaces checks what a definition reaches against the
// owner's roots and the host's providers now, as createSession would at
// each run (where it is checked again).
func (h *Host) checkAutomationPlaces(c *conn.Conn, def protocol.AutomationDefinition) error {
	if p := def.Session.Provider; p != nil {
		if _, ok := h.opts.Backends.Get(*p); !ok {
			return fmt.Errorf("no provider %s on this host (it has %s)", protocol.Quote(*p), strings.Join(h.opts.Backends.Providers(), ", "))
		}
	}
	for i, uri := range def.Session.WorkingDirectories {
		dir, err := session.DirOf(uri)
		if err != nil {
			return fmt.Errorf("session.workingDirectories[%d]: %v", i, err)
		}
		if err := h.checkRoots("automation", c.Principal(), dir); err != nil {
			return err
		}
	}
	for _, p := range automations.WatchedPaths(def) {
		if err := h.checkRoots("automation", c.Principal(), p); err != nil {
			return err
		}
	}
	return nil
}

// automationError is the protocol error of an engine error.
func automationError(method string, err error) error {
	switch {
	case errors.Is(err, automations.ErrNotFound):
		return protocol.Errorf(protocol.CodeNotFound, "%v", err)
	case errors.Is(err, automations.ErrInvalid):
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %v", method, err)
	}
	return protocol.Errorf(protocol.CodeInternalError, "%s: %v", method, err)
}

func (h *Host) listAutomationTriggerDefinitions(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.ListAutomationTriggerDefinitionsParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	return protocol.ListAutomationTriggerDefinitionsResult{Items: automations.TriggerDefinitions()}, nil
}

func (h *Host) runAutomation(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.RunAutomationParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	run, err := h.autos.e.Run(h.automationOwner(c), p.Automation, p.RequestID)
	if err != nil {
		return nil, automationError("runAutomation", err)
	}
	return protocol.RunAutomationResult{Resource: run}, nil
}

func (h *Host) fetchAutomationRuns(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.FetchAutomationRunsParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	if err := h.autos.e.FetchRuns(h.automationOwner(c), p.Automation); err != nil {
		return nil, automationError("fetchAutomationRuns", err)
	}
	return protocol.FetchAutomationRunsResult{}, nil
}

// automationTurnEnded tells the engine a session's turn ended: turn
// completed and session failed are events automations trigger on.
func (h *Host) automationTurnEnded(s *session.Session, state protocol.TurnState) {
	if h.autos == nil || h.autos.e == nil {
		return
	}
	// Only the run's own turn chains from it: later turns in its session
	// are people's.
	h.autos.mu.Lock()
	run := h.autos.runOf[s.URI()]
	delete(h.autos.runOf, s.URI())
	h.autos.mu.Unlock()
	var name string
	switch state {
	case protocol.TurnStateComplete:
		name = automations.EventTurnCompleted
	case protocol.TurnStateError:
		name = automations.EventSessionFailed
	default:
		return
	}
	h.autos.e.Event(automations.Event{Type: automations.TriggerSession, Name: name, Owner: s.Owner(), Session: s.URI(), Provider: s.Provider(), Run: run})
}
