package automations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeRunner stands for the host: each run "creates" a session and ends
// as block says (completed at once when block is nil).
type fakeRunner struct {
	mu     sync.Mutex
	n      int
	block  bool // wait for ctx
	after  func(req RunRequest, session protocol.URI)
	starts []RunRequest
}

func (r *fakeRunner) Run(ctx context.Context, req RunRequest) Outcome {
	r.mu.Lock()
	r.n++
	s := protocol.URI(fmt.Sprintf("ahp-session:/s%d", r.n))
	r.starts = append(r.starts, req)
	block, after := r.block, r.after
	r.mu.Unlock()
	req.SessionCreated(s)
	if block {
		<-ctx.Done()
		return Outcome{Err: ctx.Err()}
	}
	if after != nil {
		after(req, s)
	}
	return Outcome{}
}

// harness is an engine with a fake clock and the changes it reported.
type harness struct {
	t       *testing.T
	e       *Engine
	clock   *FakeClock
	runner  *fakeRunner
	dir     string
	changes chan Change
}

func newHarness(t *testing.T, dir string, clock *FakeClock, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock, runner: &fakeRunner{}, dir: dir, changes: make(chan Change, 10000)}
	opts.Dir, opts.Clock, opts.Runner = dir, clock, h.runner
	opts.OnChange = func(c Change) { h.changes <- c }
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	t.Cleanup(func() { e.Close() })
	return h
}

// waitEnded waits for n runs to end and returns their final states.
func (h *harness) waitEnded(n int) []protocol.AutomationRunState {
	h.t.Helper()
	var out []protocol.AutomationRunState
	timeout := time.After(testwait.Hang)
	for len(out) < n {
		select {
		case c := <-h.changes:
			if c.Run != nil && terminal(c.Run.Lifecycle) {
				out = append(out, *c.Run)
			}
		case <-timeout:
			h.t.Fatalf("%d of %d runs ended", len(out), n)
		}
	}
	return out
}

func everySecond(policy protocol.AutomationMisfirePolicy, expr string) protocol.AutomationDefinition {
	p := policy
	return protocol.AutomationDefinition{
		Title:   "tick",
		Message: protocol.Message{Text: "say tick"},
		Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationScheduleTrigger{
			ID: "s", Schedule: protocol.AutomationSchedule{Expression: expr, TimeZone: "UTC"}, MisfirePolicy: &p,
		}},
	}
}

func TestScheduleEverySecondRunsThreeTimes(t *testing.T) {
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	entry, err := h.e.Create("user:ann", "ahp-automation:/tick", everySecond(protocol.AutomationMisfirePolicyRunOnce, "* * * * * *"))
	if err != nil {
		t.Fatal(err)
	}
	if entry.NextRunAt == nil || *entry.NextRunAt != "2030-01-01T12:00:01.000Z" {
		t.Fatalf("nextRunAt = %v", entry.NextRunAt)
	}
	for i := range 3 {
		h.clock.Advance(time.Second)
		h.e.settle()
		ended := h.waitEnded(1)
		o := ended[0].Origin.(*protocol.AutomationTriggeredRunOrigin)
		want := stamp(t0.Add(time.Duration(i+1) * time.Second))
		if o.TriggerID != "s" || *o.ScheduledFor != want || o.CatchUp != nil {
			t.Fatalf("run %d origin = %+v, want scheduledFor %s", i, o, want)
		}
		if _, ok := ended[0].Lifecycle.(*protocol.AutomationCompletedRunLifecycle); !ok {
			t.Fatalf("run %d ended %T", i, ended[0].Lifecycle)
		}
		if len(ended[0].Sessions) != 1 || *ended[0].PrimarySession != ended[0].Sessions[0] {
			t.Fatalf("run %d sessions = %v primary %v", i, ended[0].Sessions, ended[0].PrimarySession)
		}
	}
	h.e.settle()
	entries := h.e.Entries("user:ann")
	if len(entries) != 1 || len(entries[0].Runs) != 3 {
		t.Fatalf("entries = %+v", entries)
	}
	if got := h.e.Entries("user:bob"); len(got) != 0 {
		t.Fatalf("another owner sees %d automations", len(got))
	}
	// The runs went out as their owner, with the automation's message.
	for _, req := range h.runner.starts {
		if req.Owner != "user:ann" || req.Definition.Message.Text != "say tick" || req.Definition.Message.Origin.Kind != protocol.MessageKindAutomation {
			t.Fatalf("run request = %+v", req)
		}
	}
}

// TestSchedulingElsewhere: two engines declaring one automation, as two
// hosts of a cluster do; only the one whose Scheduling says yes runs an
// occurrence, and when it hands over, the other runs the next.
func TestSchedulingElsewhere(t *testing.T) {
	clock := NewFakeClock(t0)
	var first atomic.Bool
	first.Store(true)
	a := newHarness(t, t.TempDir(), clock, Options{Scheduling: first.Load})
	b := newHarness(t, t.TempDir(), clock, Options{Scheduling: func() bool { return !first.Load() }})
	for _, h := range []*harness{a, b} {
		if _, err := h.e.Create("user:ann", "ahp-automation:/tick", everySecond(protocol.AutomationMisfirePolicyRunOnce, "* * * * * *")); err != nil {
			t.Fatal(err)
		}
	}
	ran := func() (int, int) {
		a.runner.mu.Lock()
		defer a.runner.mu.Unlock()
		b.runner.mu.Lock()
		defer b.runner.mu.Unlock()
		return a.runner.n, b.runner.n
	}
	clock.Advance(time.Second)
	a.e.settle()
	b.e.settle()
	a.waitEnded(1)
	if na, nb := ran(); na != 1 || nb != 0 {
		t.Fatalf("runs %d and %d, want the scheduling engine's alone", na, nb)
	}
	first.Store(false)
	clock.Advance(time.Second)
	a.e.settle()
	b.e.settle()
	b.waitEnded(1)
	if na, nb := ran(); na != 1 || nb != 1 {
		t.Fatalf("after handing over: runs %d and %d, want 1 and 1", na, nb)
	}
}

func TestMisfireAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		policy protocol.AutomationMisfirePolicy
		runs   int
	}{
		{protocol.AutomationMisfirePolicyRunOnce, 1},
		{protocol.AutomationMisfirePolicySkip, 0},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			dir, clock := t.TempDir(), NewFakeClock(t0)
			h := newHarness(t, dir, clock, Options{})
			if _, err := h.e.Create("user:ann", "ahp-automation:/hourly", everySecond(tc.policy, "0 * * * *")); err != nil {
				t.Fatal(err)
			}
			h.e.Close()
			clock.Advance(3*time.Hour + 10*time.Minute) // 13:00, 14:00 and 15:00 missed while stopped

			h2 := newHarness(t, dir, clock, Options{})
			entries := h2.e.Entries("user:ann")
			if len(entries) != 1 || len(entries[0].Runs) != tc.runs {
				t.Fatalf("after restart: %d runs, want %d", len(entries[0].Runs), tc.runs)
			}
			if tc.runs == 1 {
				o := entries[0].Runs[0].Origin.(*protocol.AutomationTriggeredRunOrigin)
				if o.CatchUp == nil || !*o.CatchUp || *o.ScheduledFor != "2030-01-01T15:00:00.000Z" {
					t.Fatalf("catch-up origin = %+v", o)
				}
				h2.waitEnded(1)
			}
			if next := *entries[0].NextRunAt; next != "2030-01-01T16:00:00.000Z" {
				t.Fatalf("nextRunAt = %s", next)
			}
			// The schedule goes on as before.
			clock.Advance(50 * time.Minute)
			h2.e.settle()
			entries = h2.e.Entries("user:ann")
			if len(entries[0].Runs) != tc.runs+1 {
				t.Fatalf("after 16:00: %d runs", len(entries[0].Runs))
			}
			h2.waitEnded(1)
		})
	}
}

func TestEventTriggerChainsTwoRuns(t *testing.T) {
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	// The host's part: a run's turn completing is a session event.
	h.runner.after = func(req RunRequest, s protocol.URI) {
		h.e.Event(Event{Type: TriggerSession, Name: EventTurnCompleted, Owner: req.Owner, Session: s, Run: req.Run})
	}
	first := protocol.AutomationDefinition{Title: "first", Message: protocol.Message{Text: "say one"}, Enabled: true}
	if _, err := h.e.Create("user:ann", "ahp-automation:/first", first); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal("ahp-automation:/first")
	second := protocol.AutomationDefinition{
		Title: "second", Message: protocol.Message{Text: "say two"}, Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationEventTrigger{
			ID: "after-first", Type: TriggerSession,
			Events: []protocol.AutomationTriggerEventDefinition{{ID: EventTurnCompleted}},
			Config: protocol.Object{"automation": cfg},
		}},
	}
	entry, err := h.e.Create("user:ann", "ahp-automation:/second", second)
	if err != nil {
		t.Fatal(err)
	}
	if et := entry.Definition.Triggers[0].(*protocol.AutomationEventTrigger); et.Title != "Session" || et.Events[0].Title != "Turn completed" {
		t.Fatalf("trigger not normalized: %+v", et)
	}
	if _, err := h.e.Run("user:ann", "ahp-automation:/first", "req-1"); err != nil {
		t.Fatal(err)
	}
	// The second run starts as the first's turn completes, so either may
	// be recorded as ended first.
	ended := h.waitEnded(2)
	if ended[0].Automation == "ahp-automation:/second" {
		ended[0], ended[1] = ended[1], ended[0]
	}
	if ended[0].Automation != "ahp-automation:/first" || ended[1].Automation != "ahp-automation:/second" {
		t.Fatalf("ended = %s and %s", ended[0].Automation, ended[1].Automation)
	}
	o := ended[1].Origin.(*protocol.AutomationTriggeredRunOrigin)
	if o.TriggerID != "after-first" || !strings.Contains(string(o.Event["session"]), "ahp-session:/s1") {
		t.Fatalf("second's origin = %+v", o)
	}
	// The second's own session completing started nothing more: it is not
	// from "first", and an automation never triggers itself.
	if n := len(h.e.Entries("user:ann")[1].Runs); n != 1 {
		t.Fatalf("second has %d runs", n)
	}
	// Another person's session does not trigger ann's automation.
	h.e.Event(Event{Type: TriggerSession, Name: EventTurnCompleted, Owner: "user:bob", Session: "ahp-session:/x"})
	if n := len(h.e.Entries("user:ann")[1].Runs); n != 1 {
		t.Fatalf("bob's session started ann's automation: %d runs", n)
	}
}

func TestEventChainIsBounded(t *testing.T) {
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	h.runner.after = func(req RunRequest, s protocol.URI) {
		h.e.Event(Event{Type: TriggerSession, Name: EventTurnCompleted, Owner: req.Owner, Session: s, Run: req.Run})
	}
	// Two automations each started by any session's turn: a ping-pong.
	for _, id := range []string{"a", "b"} {
		def := protocol.AutomationDefinition{Title: id, Message: protocol.Message{Text: "say " + id}, Enabled: true,
			Triggers: []protocol.AutomationTrigger{&protocol.AutomationEventTrigger{ID: "t", Type: TriggerSession,
				Events: []protocol.AutomationTriggerEventDefinition{{ID: EventTurnCompleted}}}}}
		if _, err := h.e.Create("user:ann", "ahp-automation:/"+id, def); err != nil {
			t.Fatal(err)
		}
	}
	h.e.Event(Event{Type: TriggerSession, Name: EventTurnCompleted, Owner: "user:ann", Session: "ahp-session:/mine"})
	// The person's turn starts both (depth 1); each then starts the other,
	// up to MaxChain deep.
	h.waitEnded(2 * MaxChain)
	total := 0
	for _, e := range h.e.Entries("user:ann") {
		total += len(e.Runs)
	}
	if total != 2*MaxChain {
		t.Fatalf("%d runs, want %d", total, 2*MaxChain)
	}
}

func TestDisableConditions(t *testing.T) {
	t.Run("afterRuns", func(t *testing.T) {
		h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
		def := everySecond(protocol.AutomationMisfirePolicyRunOnce, "* * * * * *")
		def.DisableConditions = []protocol.AutomationDisableCondition{&protocol.AutomationAfterRunsCondition{Max: 2}}
		if _, err := h.e.Create("user:ann", "ahp-automation:/twice", def); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			h.clock.Advance(time.Second)
			h.e.settle()
		}
		h.waitEnded(2)
		e := h.e.Entries("user:ann")[0]
		if len(e.Runs) != 2 || e.Definition.Enabled || *e.RunCount != 2 || e.NextRunAt != nil {
			t.Fatalf("runs %d enabled %v runCount %d next %v", len(e.Runs), e.Definition.Enabled, *e.RunCount, e.NextRunAt)
		}
		// A manual run is never blocked; enabling again gives a fresh allowance.
		if _, err := h.e.Run("user:ann", "ahp-automation:/twice", "by-hand"); err != nil {
			t.Fatal(err)
		}
		h.waitEnded(1)
		on := true
		e, err := h.e.Update("user:ann", "ahp-automation:/twice", protocol.AutomationDefinitionPatch{Enabled: &on})
		if err != nil || *e.RunCount != 0 || !e.Definition.Enabled {
			t.Fatalf("re-enabled: %v runCount %v", err, e.RunCount)
		}
		h.clock.Advance(time.Second)
		h.e.settle()
		h.waitEnded(1)
		if n := len(h.e.Entries("user:ann")[0].Runs); n != 4 {
			t.Fatalf("%d runs", n)
		}
	})
	t.Run("afterDate", func(t *testing.T) {
		h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
		def := everySecond(protocol.AutomationMisfirePolicyRunOnce, "* * * * * *")
		def.DisableConditions = []protocol.AutomationDisableCondition{&protocol.AutomationAfterDateCondition{Date: "2030-01-01T12:00:02.500Z"}}
		if _, err := h.e.Create("user:ann", "ahp-automation:/until", def); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			h.clock.Advance(time.Second)
			h.e.settle()
		}
		h.waitEnded(2)
		e := h.e.Entries("user:ann")[0]
		if len(e.Runs) != 2 || e.Definition.Enabled {
			t.Fatalf("runs %d enabled %v", len(e.Runs), e.Definition.Enabled)
		}
	})
}

func TestCancelRunAndHistory(t *testing.T) {
	dir := t.TempDir()
	clock := NewFakeClock(t0)
	h := newHarness(t, dir, clock, Options{HistoryLimit: 2})
	def := protocol.AutomationDefinition{Title: "m", Message: protocol.Message{Text: "wait 100"}, Enabled: true}
	if _, err := h.e.Create("user:ann", "ahp-automation:/m", def); err != nil {
		t.Fatal(err)
	}
	h.runner.block = true
	run, err := h.e.Run("user:ann", "ahp-automation:/m", "r0")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := h.e.Run("user:ann", "ahp-automation:/m", "r0"); again != run {
		t.Fatalf("retry made %s, not %s", again, run)
	}
	if err := h.e.CancelRun("user:bob", run); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob cancelling ann's run: %v", err)
	}
	if err := h.e.CancelRun("user:ann", run); err != nil {
		t.Fatal(err)
	}
	ended := h.waitEnded(1)
	c, ok := ended[0].Lifecycle.(*protocol.AutomationCancelledRunLifecycle)
	if !ok || c.StartedAt == nil {
		t.Fatalf("cancelled run = %#v", ended[0].Lifecycle)
	}
	if err := h.e.CancelRun("user:ann", run); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cancelling an ended run: %v", err)
	}
	h.runner.mu.Lock()
	h.runner.block = false
	h.runner.mu.Unlock()
	for i := 1; i <= 3; i++ {
		if _, err := h.e.Run("user:ann", "ahp-automation:/m", fmt.Sprint("r", i)); err != nil {
			t.Fatal(err)
		}
		h.waitEnded(1)
	}
	runs := h.e.Entries("user:ann")[0].Runs
	if len(runs) != 2 {
		t.Fatalf("%d runs kept, want 2", len(runs))
	}
	if _, err := h.e.RunState("user:ann", run); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the oldest run is still there: %v", err)
	}
	// Kept across a restart, as they were.
	h.e.Close()
	h2 := newHarness(t, dir, clock, Options{HistoryLimit: 2})
	after := h2.e.Entries("user:ann")[0]
	if len(after.Runs) != 2 || after.Runs[0].Resource != runs[0].Resource {
		t.Fatalf("after restart: %+v", after.Runs)
	}
	if err := h2.e.Remove("user:ann", "ahp-automation:/m"); err != nil {
		t.Fatal(err)
	}
	if err := h2.e.Remove("user:ann", "ahp-automation:/m"); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	h2.e.Close()
	h3 := newHarness(t, dir, clock, Options{})
	if n := len(h3.e.Entries("user:ann")); n != 0 {
		t.Fatalf("%d automations after removal and restart", n)
	}
}

func TestRunInterruptedByRestartFails(t *testing.T) {
	dir, clock := t.TempDir(), NewFakeClock(t0)
	h := newHarness(t, dir, clock, Options{})
	h.runner.block = true
	def := protocol.AutomationDefinition{Title: "m", Message: protocol.Message{Text: "wait 100"}, Enabled: true}
	if _, err := h.e.Create("user:ann", "ahp-automation:/m", def); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Run("user:ann", "ahp-automation:/m", "r"); err != nil {
		t.Fatal(err)
	}
	h.e.Close()
	ended := h.waitEnded(1)
	f, ok := ended[0].Lifecycle.(*protocol.AutomationFailedRunLifecycle)
	if !ok || !strings.Contains(f.Error.Message, "ahpd stopped") {
		t.Fatalf("run at close = %#v", ended[0].Lifecycle)
	}
}

func TestBadDefinitions(t *testing.T) {
	str := func(s string) []byte { b, _ := json.Marshal(s); return b }
	sched := func(expr, tz string) protocol.AutomationDefinition {
		d := everySecond(protocol.AutomationMisfirePolicyRunOnce, expr)
		d.Triggers[0].(*protocol.AutomationScheduleTrigger).Schedule.TimeZone = tz
		return d
	}
	event := func(typ, ev string, config protocol.Object) protocol.AutomationDefinition {
		return protocol.AutomationDefinition{Title: "e", Message: protocol.Message{Text: "say"}, Enabled: true,
			Triggers: []protocol.AutomationTrigger{&protocol.AutomationEventTrigger{ID: "e", Type: typ,
				Events: []protocol.AutomationTriggerEventDefinition{{ID: ev}}, Config: config}}}
	}
	withConds := func(c ...protocol.AutomationDisableCondition) protocol.AutomationDefinition {
		d := everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 9 * * 1-5")
		d.DisableConditions = c
		return d
	}
	dupIDs := everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 9 * * *")
	dupIDs.Triggers = append(dupIDs.Triggers, dupIDs.Triggers[0])
	badPolicy := everySecond("sometimes", "0 9 * * *")
	userMsg := everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 9 * * *")
	userMsg.Message.Origin.Kind = protocol.MessageKindUser
	for _, tc := range []struct {
		name string
		uri  string
		def  protocol.AutomationDefinition
		want string
	}{
		{"minute out of range", "", sched("61 * * * *", "UTC"), "61"},
		{"four fields", "", sched("* * * *", "UTC"), "has 4 fields"},
		{"macro", "", sched("@daily", "UTC"), "1 fields"},
		{"quartz", "", sched("0 0 L * *", "UTC"), "syntax AHP does not have"},
		{"never", "", sched("0 0 31 2 *", "UTC"), "never comes round"},
		{"unknown time zone", "", sched("0 9 * * *", "Mars/Olympus_Mons"), "unknown time zone \"Mars/Olympus_Mons\""},
		{"no time zone", "", sched("0 9 * * *", ""), "no time zone"},
		{"local time zone", "", sched("0 9 * * *", "Local"), "unknown time zone"},
		{"misfire policy", "", badPolicy, "neither \"skip\" nor \"runOnce\""},
		{"duplicate trigger ids", "", dupIDs, "two triggers have the id \"s\""},
		{"unknown event type", "", event("ahpd.weather", "rain", nil), "unknown event trigger type \"ahpd.weather\""},
		{"unknown event", "", event(TriggerSession, "sessionExploded", nil), "has no event \"sessionExploded\""},
		{"folder missing", "", event(TriggerFiles, EventFileChanged, nil), "needs folder"},
		{"folder relative", "", event(TriggerFiles, EventFileChanged, protocol.Object{"folder": str("src")}), "not an absolute path"},
		{"config unknown key", "", event(TriggerGitRef, EventRefUpdated, protocol.Object{"repository": str("/r"), "branch": str("main")}), "takes no key \"branch\""},
		{"config not a string", "", event(TriggerGitRef, EventRefUpdated, protocol.Object{"repository": []byte("42")}), "repository must be a string"},
		{"bad glob", "", event(TriggerFiles, EventFileChanged, protocol.Object{"folder": str("/tmp"), "pattern": str("[")}), "not a valid glob"},
		{"afterRuns zero", "", withConds(&protocol.AutomationAfterRunsCondition{Max: 0}), "at least 1"},
		{"afterDate twice", "", withConds(&protocol.AutomationAfterDateCondition{Date: "2031-01-01T00:00:00Z"}, &protocol.AutomationAfterDateCondition{Date: "2032-01-01T00:00:00Z"}), "appears twice"},
		{"afterDate not a date", "", withConds(&protocol.AutomationAfterDateCondition{Date: "next tuesday"}), "not an ISO 8601"},
		{"user message", "", userMsg, "has kind \"automation\""},
		{"bad uri", "ahp-session:/x", sched("0 9 * * *", "UTC"), "not an ahp-automation:/<id> URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
			uri := tc.uri
			if uri == "" {
				uri = "ahp-automation:/x"
			}
			_, err := h.e.Create("user:ann", uri, tc.def)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if n := len(h.e.Entries("user:ann")); n != 0 {
				t.Fatalf("a refused automation was kept")
			}
		})
	}
}

func TestDeclared(t *testing.T) {
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	def := everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 9 * * *")
	decl := []Declared{{Owner: "user:ann", Resource: "ahp-automation:/nightly", Definition: def}}
	if err := h.e.SetDeclared(decl); err != nil {
		t.Fatal(err)
	}
	e := h.e.Entries("user:ann")
	if len(e) != 1 || len(e[0].Operations) != 1 || e[0].Operations[0] != protocol.AutomationOperationRun {
		t.Fatalf("declared entry = %+v", e)
	}
	if _, err := h.e.Update("user:ann", "ahp-automation:/nightly", protocol.AutomationDefinitionPatch{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("updating a declared automation: %v", err)
	}
	if err := h.e.SetDeclared(nil); err != nil {
		t.Fatal(err)
	}
	if n := len(h.e.Entries("user:ann")); n != 0 {
		t.Fatalf("an undeclared automation stayed")
	}
}

// TestChangesToldOutsideTheLock: OnChange is called holding none of the
// engine's locks, so what it does can wait on the engine being used (the
// host publishes under locks of its own), and a snapshot taken meanwhile
// is told in its place: after the change it saw.
func TestChangesToldOutsideTheLock(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var order []string
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	e, err := Open(Options{Dir: t.TempDir(), Clock: NewFakeClock(t0), Runner: &fakeRunner{}, OnChange: func(c Change) {
		once.Do(func() {
			close(entered)
			<-release
		})
		if c.Entry != nil {
			note("change " + string(c.Entry.Resource))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	def := protocol.AutomationDefinition{Title: "a", Message: protocol.Message{Text: "say a"}, Enabled: true}
	created := make(chan error, 1)
	go func() {
		_, err := e.Create("user:ann", "ahp-automation:/a", def)
		created <- err
	}()
	<-entered
	// The engine's lock is free while its change is being told.
	if got := e.Entries("user:ann"); len(got) != 1 {
		t.Fatalf("entries while the change is told: %d", len(got))
	}
	snapped := make(chan struct{})
	go func() {
		e.Snapshot("user:ann", func(entries []protocol.AutomationEntry) { note(fmt.Sprintf("snapshot of %d", len(entries))) })
		close(snapped)
	}()
	close(release)
	<-snapped
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "change ahp-automation:/a" || order[1] != "snapshot of 1" {
		t.Errorf("told %q; want the change, then the snapshot that saw it", order)
	}
}
