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
			// Made with the due time a few whole seconds ahead, time to make
			// it and stop ahpd; a machine too slow for that tries again
			// from the start, with twice the time.
			var (
				e   *env
				due time.Time
			)
			for margin := 4 * time.Second; ; margin *= 2 {
				if margin > startTimeout {
					t.Fatalf("ahpd never stopped before the schedule was due, %v ahead", margin/2)
				}
				e = newEnv(t)
				p := serveDaemon(t, e)
				due = time.Now().Add(margin).Truncate(time.Second).UTC()
				once := fmt.Sprintf("%d %d %d * * *", due.Second(), due.Minute(), due.Hour())
				add := cli(t, e, "automations", "add", "--id", "tick", "--message", "say tick", "--provider", "script",
					"--cron", once, "--cron", "* * * * * *", "--tz", "UTC", "--misfire", policy)
				if add.code != 0 {
					t.Fatalf("automations add: %d %s", add.code, add.stderr)
				}
				p.terminate()
				if stopped := time.Now(); stopped.Before(due) {
					break
				}
				t.Logf("ahpd stopped after the schedule was due (%v); again with %v", due, 2*margin)
			}
			// The one wait on time: the due time must pass while ahpd is
			// down, which is what the test is about.
			<-time.After(time.Until(due) + 50*time.Millisecond)

			p := serveDaemon(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
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
