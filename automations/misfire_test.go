package automations

import (
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// waitRunning waits for a run to be marked running.
func (h *harness) waitRunning() {
	h.t.Helper()
	timeout := time.After(testwait.Hang)
	for {
		select {
		case c := <-h.changes:
			if c.Run == nil {
				continue
			}
			if _, ok := c.Run.Lifecycle.(*protocol.AutomationRunningRunLifecycle); ok {
				return
			}
		case <-timeout:
			h.t.Fatalf("no run started")
		}
	}
}

// scheduledRuns are the automation's runs, newest first, as "scheduledFor
// catchUp" pairs.
func scheduledRuns(t *testing.T, h *harness) []string {
	t.Helper()
	entries := h.e.Entries("user:ann")
	if len(entries) != 1 {
		t.Fatalf("%d automations", len(entries))
	}
	var out []string
	for _, r := range entries[0].Runs {
		o := r.Origin.(*protocol.AutomationTriggeredRunOrigin)
		s := *o.ScheduledFor
		if o.CatchUp != nil && *o.CatchUp {
			s += " catchUp"
		}
		out = append(out, s)
	}
	return out
}

// TestMisfireNeverDoubles: a host down over a schedule's due times, its
// engine opened again on the same store, runs one catch-up (runOnce) or
// none (skip), for the latest occurrence missed; an occurrence that ran
// before the stop, finished or not, never runs again, nor does a
// catch-up when the host restarts once more.
func TestMisfireNeverDoubles(t *testing.T) {
	type step struct {
		ran  bool          // advance to the next occurrence and let it run before stopping
		busy bool          // ... and stop while it is still running
		down time.Duration // how long the host is down after
	}
	for _, tc := range []struct {
		name  string
		expr  string
		tz    string
		start time.Time
		steps []step
		want  map[protocol.AutomationMisfirePolicy][]string // runs after, newest first
		next  string                                        // nextRunAt at the end
	}{
		{"down over none, after a run", "0 * * * *", "UTC", t0,
			[]step{{ran: true, down: 30 * time.Minute}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2030-01-01T13:00:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2030-01-01T13:00:00.000Z"},
			}, "2030-01-01T14:00:00.000Z"},
		{"down over one, after a run", "0 * * * *", "UTC", t0,
			[]step{{ran: true, down: 70 * time.Minute}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2030-01-01T14:00:00.000Z catchUp", "2030-01-01T13:00:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2030-01-01T13:00:00.000Z"},
			}, "2030-01-01T15:00:00.000Z"},
		{"down over several, then restarted at once", "0 * * * *", "UTC", t0,
			[]step{{ran: true, down: 3*time.Hour + 10*time.Minute}, {down: 0}, {down: 20 * time.Minute}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2030-01-01T16:00:00.000Z catchUp", "2030-01-01T13:00:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2030-01-01T13:00:00.000Z"},
			}, "2030-01-01T17:00:00.000Z"},
		{"stopped during a run, restarted before the next", "0 * * * *", "UTC", t0,
			[]step{{ran: true, busy: true, down: 0}, {down: 59 * time.Minute}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2030-01-01T13:00:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2030-01-01T13:00:00.000Z"},
			}, "2030-01-01T14:00:00.000Z"},
		{"stopped during a run, down over the next", "0 * * * *", "UTC", t0,
			[]step{{ran: true, busy: true, down: time.Hour}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2030-01-01T14:00:00.000Z catchUp", "2030-01-01T13:00:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2030-01-01T13:00:00.000Z"},
			}, "2030-01-01T15:00:00.000Z"},
		// 02:30 does not exist in Berlin on 2027-03-28: its occurrence is
		// 03:00 CEST (01:00Z), and that is the one caught up.
		{"down over a spring-forward occurrence", "30 2 * * *", "Europe/Berlin", time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC),
			[]step{{down: 24 * time.Hour}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2027-03-28T01:00:00.000Z catchUp"},
				protocol.AutomationMisfirePolicySkip:    nil,
			}, "2027-03-29T00:30:00.000Z"},
		// 02:30 is twice in Berlin on 2026-10-25: it ran at the first
		// (00:30Z); down over the second, nothing is missed.
		{"down over a repeated hour", "30 2 * * *", "Europe/Berlin", time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
			[]step{{ran: true, down: 90 * time.Minute}},
			map[protocol.AutomationMisfirePolicy][]string{
				protocol.AutomationMisfirePolicyRunOnce: {"2026-10-25T00:30:00.000Z"},
				protocol.AutomationMisfirePolicySkip:    {"2026-10-25T00:30:00.000Z"},
			}, "2026-10-26T01:30:00.000Z"},
	} {
		for _, policy := range []protocol.AutomationMisfirePolicy{protocol.AutomationMisfirePolicyRunOnce, protocol.AutomationMisfirePolicySkip} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				dir, clock := t.TempDir(), NewFakeClock(tc.start)
				def := everySecond(policy, tc.expr)
				def.Triggers[0].(*protocol.AutomationScheduleTrigger).Schedule.TimeZone = tc.tz
				h := newHarness(t, dir, clock, Options{})
				if _, err := h.e.Create("user:ann", "ahp-automation:/sched", def); err != nil {
					t.Fatal(err)
				}
				for _, st := range tc.steps {
					if st.ran {
						e, _ := h.e.Entry("user:ann", "ahp-automation:/sched")
						next, _ := time.Parse(time.RFC3339, *e.NextRunAt)
						h.runner.mu.Lock()
						h.runner.block = st.busy
						h.runner.mu.Unlock()
						clock.Advance(next.Sub(clock.Now()))
						h.e.settle()
						if st.busy {
							h.waitRunning()
						} else {
							h.waitEnded(1)
						}
					}
					h.e.Close()
					clock.Advance(st.down)
					h = newHarness(t, dir, clock, Options{})
				}
				h.e.settle()
				got := scheduledRuns(t, h)
				want := tc.want[policy]
				if len(got) != len(want) {
					t.Fatalf("runs %q, want %q", got, want)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("runs %q, want %q", got, want)
					}
				}
				e, _ := h.e.Entry("user:ann", "ahp-automation:/sched")
				if e.NextRunAt == nil || *e.NextRunAt != tc.next {
					t.Fatalf("nextRunAt %v, want %s", e.NextRunAt, tc.next)
				}
			})
		}
	}
}
