package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// TestAutomationMissedWhileStopped: a schedule whose due time passes
// while ahpd is stopped runs once after the restart under runOnce, and
// not at all under skip. The daemon's clock is the wall clock, so the
// automation has two real schedules (six-field cron, seconds first): one
// due once, a few seconds after it is made, and one every second. A run
// of the every-second schedule fired by the restarted scheduler (not a
// catch-up) proves the daemon is past the missed time and has settled
// what it missed; then the runs of the first schedule are counted.
func TestAutomationMissedWhileStopped(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"runOnce", "skip"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := serveDaemon(t, e)
			// Whole seconds, 3 to 4 from now: time to make it and stop.
			due := time.Now().Add(4 * time.Second).Truncate(time.Second).UTC()
			once := fmt.Sprintf("%d %d %d * * *", due.Second(), due.Minute(), due.Hour())
			add := cli(t, e, "automations", "add", "--id", "tick", "--message", "say tick", "--provider", "script",
				"--cron", once, "--cron", "* * * * * *", "--tz", "UTC", "--misfire", policy)
			if add.code != 0 {
				t.Fatalf("automations add: %d %s", add.code, add.stderr)
			}
			p.terminate()
			if stopped := time.Now(); !stopped.Before(due) {
				t.Fatalf("ahpd stopped at %v, after the schedule was due (%v): the machine is too slow for this test's margin", stopped, due)
			}
			// The one wait on time: the due time must pass while ahpd is
			// down, which is what the test is about.
			<-time.After(time.Until(due) + 50*time.Millisecond)

			p = serveDaemon(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, p.url(""), &client.Options{Token: e.token(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Subscribe(ctx, automations.CatalogueURI); err != nil {
				t.Fatal(err)
			}
			st, err := c.WaitState(ctx, automations.CatalogueURI, func(s protocol.ChannelState) bool {
				for _, r := range tickRuns(s) {
					if o := r.origin; o.TriggerID == "schedule-1" && (o.CatchUp == nil || !*o.CatchUp) && o.ScheduledFor != nil && *o.ScheduledFor > stampUTC(due) {
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatalf("no run of the every-second schedule after the restart: %v; catalogue %+v", err, c.State(automations.CatalogueURI))
			}
			var missed []*protocol.AutomationTriggeredRunOrigin
			for _, r := range tickRuns(st) {
				if r.origin.TriggerID == "schedule-0" {
					missed = append(missed, r.origin)
				}
			}
			switch policy {
			case "runOnce":
				if len(missed) != 1 || missed[0].CatchUp == nil || !*missed[0].CatchUp || *missed[0].ScheduledFor != stampUTC(due) {
					t.Fatalf("runs of the missed schedule: %s; want one catch-up scheduled for %s", originsText(missed), stampUTC(due))
				}
			case "skip":
				if len(missed) != 0 {
					t.Fatalf("runs of the missed schedule under skip: %s; want none", originsText(missed))
				}
			}
		})
	}
}

type tickRun struct {
	summary protocol.AutomationRunSummary
	origin  *protocol.AutomationTriggeredRunOrigin
}

// tickRuns are the triggered runs of ahp-automation:/tick.
func tickRuns(s protocol.ChannelState) []tickRun {
	as, _ := s.(*protocol.AutomationState)
	if as == nil {
		return nil
	}
	var out []tickRun
	for _, e := range as.Entries {
		if e.Resource != "ahp-automation:/tick" {
			continue
		}
		for _, r := range e.Runs {
			if o, ok := r.Origin.(*protocol.AutomationTriggeredRunOrigin); ok {
				out = append(out, tickRun{r, o})
			}
		}
	}
	return out
}

// stampUTC is a time as the engine writes scheduledFor.
func stampUTC(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func originsText(os []*protocol.AutomationTriggeredRunOrigin) string {
	s := "["
	for _, o := range os {
		catchUp := o.CatchUp != nil && *o.CatchUp
		s += fmt.Sprintf(" {%s at %v catchUp %v}", o.TriggerID, *o.ScheduledFor, catchUp)
	}
	return s + " ]"
}
