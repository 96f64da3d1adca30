package host_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// completedRuns counts the catalogue entry's runs that completed with a
// session.
func completedRuns(st protocol.ChannelState, uri string) int {
	n := 0
	for _, e := range st.(*protocol.AutomationState).Entries {
		if e.Resource != uri {
			continue
		}
		for _, r := range e.Runs {
			if _, ok := r.Lifecycle.(*protocol.AutomationCompletedRunLifecycle); ok && r.PrimarySession != nil {
				n++
			}
		}
	}
	return n
}

// TestAutomationOverTheProtocol makes an automation over a real WebSocket
// with a schedule every second, moves the host's clock three seconds, and
// finds three runs, each a session whose turn completed.
func TestAutomationOverTheProtocol(t *testing.T) {
	t.Parallel()
	clock := automations.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Automations.Clock = clock })
	c := hosttest.Dial(t, th.url)
	defer c.Close()
	init := c.Initialize("automator", protocol.RootURI)
	if init.Automations == nil || init.Automations.Create == nil || init.Automations.RunHistoryLimit == nil {
		t.Fatalf("initialize says no automations: %+v", init.Automations)
	}
	c.Subscribe(automations.CatalogueURI)

	raw := c.MustCall("listAutomationTriggerDefinitions", map[string]any{"channel": protocol.RootURI})
	var defs protocol.ListAutomationTriggerDefinitionsResult
	if err := json.Unmarshal(raw, &defs); err != nil || len(defs.Items) != 3 {
		t.Fatalf("trigger definitions: %v %s", err, raw)
	}

	provider := "script"
	const uri = "ahp-automation:/hello"
	c.Dispatch(automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: protocol.AutomationDefinition{
		Title:   "hello every second",
		Message: protocol.Message{Text: "say hello", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + th.work}},
		Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationScheduleTrigger{ID: "tick",
			Schedule: protocol.AutomationSchedule{Expression: "* * * * * *", TimeZone: "UTC"}}},
	}})
	c.WaitState(automations.CatalogueURI, "the automation is created", func(st protocol.ChannelState) bool {
		return len(st.(*protocol.AutomationState).Entries) == 1
	})
	for i := 1; i <= 3; i++ {
		clock.Advance(time.Second)
		c.WaitState(automations.CatalogueURI, fmt.Sprintf("run %d completed", i), func(st protocol.ChannelState) bool {
			return completedRuns(st, uri) == i
		})
	}
	entry := c.State(automations.CatalogueURI).(*protocol.AutomationState).Entries[0]
	if len(entry.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(entry.Runs))
	}
	seen := map[string]bool{}
	for _, r := range entry.Runs {
		s := *r.PrimarySession
		if seen[s] {
			t.Fatalf("two runs share session %s", s)
		}
		seen[s] = true
		snap := c.Subscribe(protocol.DefaultChatURI(s))
		chat := snap.State.(*protocol.ChatState)
		if len(chat.Turns) != 1 || chat.Turns[0].State != protocol.TurnStateComplete {
			t.Fatalf("run %s's session %s: %+v", r.Resource, s, chat.Turns)
		}
	}

	// A manual run, and a bad definition refused with its reason.
	if _, err := c.Call("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": uri, "requestId": "by-hand"}); err != nil {
		t.Fatal(err)
	}
	c.WaitState(automations.CatalogueURI, "the manual run completed", func(st protocol.ChannelState) bool {
		return completedRuns(st, uri) == 4
	})
	if _, err := c.Call("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": "ahp-automation:/nope", "requestId": "x"}); err == nil || err.Code != int64(protocol.CodeNotFound) {
		t.Fatalf("running an unknown automation: %v", err)
	}
}

// TestAutomationRunCancelled cancels a run while its turn runs: the turn
// is cancelled with it, and the run ends cancelled.
func TestAutomationRunCancelled(t *testing.T) {
	t.Parallel()
	clock := automations.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Automations.Clock = clock })
	c := th.client("automator")
	c.Subscribe(automations.CatalogueURI)
	provider := "script"
	const uri = "ahp-automation:/long"
	c.Dispatch(automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: protocol.AutomationDefinition{
		Title:   "a long one",
		Message: protocol.Message{Text: "say started\nwait 30s\nsay never", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + th.work}},
		Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationScheduleTrigger{ID: "yearly",
			Schedule: protocol.AutomationSchedule{Expression: "0 0 1 1 *", TimeZone: "UTC"}}},
	}})
	c.WaitState(automations.CatalogueURI, "the automation is created", func(st protocol.ChannelState) bool {
		return len(st.(*protocol.AutomationState).Entries) == 1
	})
	raw := c.MustCall("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": uri, "requestId": "now"})
	var run protocol.RunAutomationResult
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatal(err)
	}
	var session string
	c.WaitState(automations.CatalogueURI, "the run's session", func(st protocol.ChannelState) bool {
		for _, r := range st.(*protocol.AutomationState).Entries[0].Runs {
			if r.Resource == run.Resource && r.PrimarySession != nil {
				session = *r.PrimarySession
				return true
			}
		}
		return false
	})
	// Its session is the runner's own until the turn goes out in it.
	c.Wait("the run's session announced", func(msgs []hosttest.Message) bool {
		return slices.Contains(announced(t, msgs), session)
	})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	saying(t, c, chat, "started")

	c.Subscribe(run.Resource)
	c.Dispatch(run.Resource, &protocol.AutomationRunCancelRequestedAction{})
	cs := c.WaitState(chat, "the run's turn to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) == 1
	}).(*protocol.ChatState)
	if cs.Turns[0].State != protocol.TurnStateCancelled {
		t.Errorf("the run's turn ended %s, want cancelled", cs.Turns[0].State)
	}
	c.WaitState(automations.CatalogueURI, "the run to end cancelled", func(st protocol.ChannelState) bool {
		for _, r := range st.(*protocol.AutomationState).Entries[0].Runs {
			if _, ok := r.Lifecycle.(*protocol.AutomationCancelledRunLifecycle); ok && r.Resource == run.Resource {
				return true
			}
		}
		return false
	})
}

// TestAutomationChainsOverRealSessions: a run's turn completing in a real
// session starts the automation that waits for it, whose run is a second
// session with its own completed turn.
func TestAutomationChainsOverRealSessions(t *testing.T) {
	t.Parallel()
	clock := automations.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", func(o *host.Options) { o.Automations.Clock = clock })
	c := th.client("automator")
	c.Subscribe(automations.CatalogueURI)
	provider := "script"
	define := func(uri, text string, triggers ...protocol.AutomationTrigger) {
		c.Dispatch(automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: protocol.AutomationDefinition{
			Title:    uri,
			Message:  protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
			Session:  protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + th.work}},
			Enabled:  true,
			Triggers: triggers,
		}})
	}
	const first, second = "ahp-automation:/first", "ahp-automation:/second"
	define(first, "say one", &protocol.AutomationScheduleTrigger{ID: "yearly",
		Schedule: protocol.AutomationSchedule{Expression: "0 0 1 1 *", TimeZone: "UTC"}})
	from, _ := json.Marshal(first)
	define(second, "say two", &protocol.AutomationEventTrigger{ID: "after-first", Type: automations.TriggerSession,
		Events: []protocol.AutomationTriggerEventDefinition{{ID: automations.EventTurnCompleted}},
		Config: protocol.Object{"automation": from}})
	c.WaitState(automations.CatalogueURI, "both automations", func(st protocol.ChannelState) bool {
		return len(st.(*protocol.AutomationState).Entries) == 2
	})
	c.MustCall("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": first, "requestId": "go"})
	st := c.WaitState(automations.CatalogueURI, "a run of each completed", func(st protocol.ChannelState) bool {
		return completedRuns(st, first) == 1 && completedRuns(st, second) == 1
	})
	var sessions []string
	for _, e := range st.(*protocol.AutomationState).Entries {
		r := e.Runs[0]
		sessions = append(sessions, *r.PrimarySession)
		if e.Resource == second {
			if o, ok := r.Origin.(*protocol.AutomationTriggeredRunOrigin); !ok || o.TriggerID != "after-first" {
				t.Errorf("the second run's origin: %#v", r.Origin)
			}
		}
	}
	if sessions[0] == sessions[1] {
		t.Fatalf("both runs in session %s", sessions[0])
	}
	for _, s := range sessions {
		chat := c.Subscribe(protocol.DefaultChatURI(s)).State.(*protocol.ChatState)
		if len(chat.Turns) != 1 || chat.Turns[0].State != protocol.TurnStateComplete {
			t.Errorf("session %s: %+v", s, chat.Turns)
		}
	}
	// The second's session completing started nothing more.
	if n := len(c.State(automations.CatalogueURI).(*protocol.AutomationState).Entries[1].Runs) +
		len(c.State(automations.CatalogueURI).(*protocol.AutomationState).Entries[0].Runs); n != 2 {
		t.Errorf("%d runs in all, want 2", n)
	}
}

// TestAutomationWithoutRunner checks a host made without a runner takes
// automations and fails their runs saying why, starting no session.
func TestAutomationWithoutRunner(t *testing.T) {
	t.Parallel()
	th := startHost(t, "", func(o *host.Options) { o.Automations.NewRunner = nil })
	c := hosttest.Dial(t, th.url)
	defer c.Close()
	c.Initialize("automator", protocol.RootURI)
	c.Subscribe(automations.CatalogueURI)
	provider := "script"
	const uri = "ahp-automation:/by-hand"
	c.Dispatch(automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: protocol.AutomationDefinition{
		Title:   "by hand",
		Message: protocol.Message{Text: "say hello", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + th.work}},
		Enabled: true,
	}})
	c.WaitState(automations.CatalogueURI, "the automation is created", func(st protocol.ChannelState) bool {
		return len(st.(*protocol.AutomationState).Entries) == 1
	})
	if _, err := c.Call("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": uri, "requestId": "r1"}); err != nil {
		t.Fatal(err)
	}
	var failed *protocol.AutomationFailedRunLifecycle
	c.WaitState(automations.CatalogueURI, "the run failed", func(st protocol.ChannelState) bool {
		for _, r := range st.(*protocol.AutomationState).Entries[0].Runs {
			if f, ok := r.Lifecycle.(*protocol.AutomationFailedRunLifecycle); ok {
				failed = f
				return r.PrimarySession == nil
			}
		}
		return false
	})
	if !strings.Contains(failed.Error.Message, "runs no automations") {
		t.Errorf("the run failed with %q", failed.Error.Message)
	}
	raw := c.MustCall("listSessions", map[string]any{"channel": protocol.RootURI})
	if strings.Contains(string(raw), "ahp-session") {
		t.Errorf("a run without a runner left a session: %s", raw)
	}
}
