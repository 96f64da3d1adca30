package dashboard

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// TestAutomationWatchError: an automation whose trigger does not watch
// shows the host's reason on its row.
func TestAutomationWatchError(t *testing.T) {
	e := protocol.AutomationEntry{Resource: "ahp-automation:/w", Definition: protocol.AutomationDefinition{Enabled: true}}
	if v := automationOf(&e); v.WatchError != "" {
		t.Errorf("a watching automation shows %q", v.WatchError)
	}
	e.Meta = protocol.Object{"ahpd.watchError": jsontext.Value(`{"errorType":"watchFailed","message":"trigger \"w\": the watcher stopped"}`)}
	if v := automationOf(&e); v.WatchError != `trigger "w": the watcher stopped` {
		t.Errorf("the watch error shown: %q", v.WatchError)
	}
}

// TestAutomationRunCounts: the page counts the runs the entry lists, by
// how they started, and says runCount only beside an afterRuns
// condition, as what it is.
func TestAutomationRunCounts(t *testing.T) {
	manual := protocol.AutomationRunSummary{Origin: &protocol.AutomationManualRunOrigin{}}
	auto := protocol.AutomationRunSummary{Origin: &protocol.AutomationTriggeredRunOrigin{TriggerID: "clock"}}
	for _, c := range []struct {
		runs  []protocol.AutomationRunSummary
		older bool
		want  string
	}{
		{nil, false, "no runs on record"},
		{[]protocol.AutomationRunSummary{manual}, false, "1 run on record, by hand"},
		{[]protocol.AutomationRunSummary{auto}, false, "1 run on record, automatic"},
		{[]protocol.AutomationRunSummary{manual, auto, manual}, false, "3 runs on record: 2 by hand, 1 automatic"},
		{[]protocol.AutomationRunSummary{auto, auto}, true, "2 runs on record: 0 by hand, 2 automatic, and older ones"},
	} {
		if got := runsText(c.runs, c.older); got != c.want {
			t.Errorf("runsText = %q, want %q", got, c.want)
		}
	}
	n := int64(2)
	e := protocol.AutomationEntry{RunCount: &n, Runs: []protocol.AutomationRunSummary{manual, manual, manual, auto, auto},
		Definition: protocol.AutomationDefinition{DisableConditions: []protocol.AutomationDisableCondition{&protocol.AutomationAfterRunsCondition{Max: 5}}}}
	v := automationOf(&e)
	if v.RunsText != "5 runs on record: 3 by hand, 2 automatic" || v.Allowance != "2 of 5 automatic runs made since it was enabled; then its triggers turn off" {
		t.Errorf("with afterRuns: %q; %q", v.RunsText, v.Allowance)
	}
	if v := automationOf(&protocol.AutomationEntry{}); v.Allowance != "" {
		t.Errorf("without afterRuns: %q", v.Allowance)
	}
}

// TestAutomationNextRun: the next run is read in the zone of the
// automation's schedules when they have one, else in UTC.
func TestAutomationNextRun(t *testing.T) {
	next := "2026-07-01T00:30:00Z"
	sched := func(tz string) protocol.AutomationTrigger {
		return &protocol.AutomationScheduleTrigger{ID: tz, Schedule: protocol.AutomationSchedule{Expression: "30 2 * * *", TimeZone: tz}}
	}
	for _, c := range []struct {
		triggers []protocol.AutomationTrigger
		want     string
	}{
		{[]protocol.AutomationTrigger{sched("Europe/Berlin")}, "2026-07-01 02:30 Europe/Berlin"},
		{[]protocol.AutomationTrigger{sched("Europe/Berlin"), sched("Asia/Tokyo")}, "2026-07-01 00:30 UTC"},
	} {
		v := automationOf(&protocol.AutomationEntry{NextRunAt: &next, Definition: protocol.AutomationDefinition{Triggers: c.triggers}})
		if v.NextRun == nil || v.NextRun.ISO != next || v.NextRun.Text != c.want {
			t.Errorf("next run: %+v, want %q", v.NextRun, c.want)
		}
	}
	if v := instantView("2026-07-01T00:30:05.5Z", "UTC"); v.Text != "2026-07-01 00:30:05 UTC" || v.ISO != "2026-07-01T00:30:05Z" {
		t.Errorf("with seconds: %+v", v)
	}
}
