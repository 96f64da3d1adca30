package automations

import (
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// TestKeptWithoutOwner: on a host without a users directory automations
// belong to nobody (owner ""), and they are kept across a restart like
// anyone's.
func TestKeptWithoutOwner(t *testing.T) {
	dir, clock := t.TempDir(), NewFakeClock(t0)
	h := newHarness(t, dir, clock, Options{})
	if _, err := h.e.Create("", "ahp-automation:/hourly", everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 * * * *")); err != nil {
		t.Fatal(err)
	}
	h.e.Close()
	clock.Advance(90 * time.Minute) // 13:00 missed while stopped
	h2 := newHarness(t, dir, clock, Options{})
	entries := h2.e.Entries("")
	if len(entries) != 1 || len(entries[0].Runs) != 1 {
		t.Fatalf("after restart: %+v, want the automation and its catch-up run", entries)
	}
	h2.waitEnded(1)
}
