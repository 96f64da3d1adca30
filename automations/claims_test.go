package automations

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// claimStore stands for the store hosts share: an occurrence is won by
// the first host to claim it.
type claimStore struct {
	mu    sync.Mutex
	by    map[Occurrence]string
	fails int // claims to refuse with an error first, as an unreachable store does
}

func (cs *claimStore) claim(host string) func(context.Context, Occurrence) (bool, error) {
	return func(_ context.Context, o Occurrence) (bool, error) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.fails > 0 {
			cs.fails--
			return false, errors.New("store unreachable")
		}
		o.At = o.At.UTC()
		if _, taken := cs.by[o]; taken {
			return false, nil
		}
		cs.by[o] = host
		return true, nil
	}
}

// twoHosts are two engines declaring one hourly automation, sharing a
// clock and a claim store, each running the schedules while its flag says.
type twoHosts struct {
	clock  *FakeClock
	claims *claimStore
	a, b   *harness
	onA    atomic.Bool
	onB    atomic.Bool
}

func newTwoHosts(t *testing.T) *twoHosts {
	th := &twoHosts{clock: NewFakeClock(t0), claims: &claimStore{by: map[Occurrence]string{}}}
	th.a = newHarness(t, t.TempDir(), th.clock, Options{Scheduling: th.onA.Load, Claim: th.claims.claim("a")})
	th.b = newHarness(t, t.TempDir(), th.clock, Options{Scheduling: th.onB.Load, Claim: th.claims.claim("b")})
	for _, h := range []*harness{th.a, th.b} {
		if _, err := h.e.Create("user:ann", "ahp-automation:/hourly", everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 * * * *")); err != nil {
			t.Fatal(err)
		}
	}
	return th
}

// advance moves the clock and lets both schedulers make their pass.
func (th *twoHosts) advance(d time.Duration) {
	th.clock.Advance(d)
	th.a.e.settle()
	th.b.e.settle()
}

// runs are each host's runs' scheduled times, newest first.
func (th *twoHosts) runs(t *testing.T) (a, b []string) {
	t.Helper()
	for _, r := range th.a.e.Entries("user:ann")[0].Runs {
		a = append(a, *r.Origin.(*protocol.AutomationTriggeredRunOrigin).ScheduledFor)
	}
	for _, r := range th.b.e.Entries("user:ann")[0].Runs {
		b = append(b, *r.Origin.(*protocol.AutomationTriggeredRunOrigin).ScheduledFor)
	}
	return a, b
}

func sameRuns(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestHandoverAfterTheDueTime: the host running the schedules gives them
// up before 13:00 and the other takes them 30 s after: the other claims
// 13:00 and runs it, late, rather than nobody running it.
func TestHandoverAfterTheDueTime(t *testing.T) {
	th := newTwoHosts(t)
	th.onA.Store(true)
	th.onA.Store(false) // a stops running the schedules, say for a restart
	th.advance(time.Hour)
	th.onB.Store(true)
	th.advance(30 * time.Second)
	th.b.waitEnded(1)
	if a, b := th.runs(t); len(a) != 0 || !sameRuns(b, []string{"2030-01-01T13:00:00.000Z"}) {
		t.Fatalf("runs %q and %q; want 13:00 on b alone", a, b)
	}
	// b goes on from there, and a, not running them, runs nothing.
	th.advance(time.Hour - 30*time.Second)
	th.b.waitEnded(1)
	if a, b := th.runs(t); len(a) != 0 || !sameRuns(b, []string{"2030-01-01T14:00:00.000Z", "2030-01-01T13:00:00.000Z"}) {
		t.Fatalf("runs %q and %q; want 13:00 and 14:00 on b", a, b)
	}
}

// TestHandoverAfterARun: a ran 13:00 and then the schedules moved to b:
// b's claim of 13:00 is lost, so it does not run it again.
func TestHandoverAfterARun(t *testing.T) {
	th := newTwoHosts(t)
	th.onA.Store(true)
	th.advance(time.Hour)
	th.a.waitEnded(1)
	th.onA.Store(false)
	th.onB.Store(true)
	th.advance(30 * time.Second)
	if a, b := th.runs(t); !sameRuns(a, []string{"2030-01-01T13:00:00.000Z"}) || len(b) != 0 {
		t.Fatalf("runs %q and %q; want 13:00 on a alone", a, b)
	}
}

// TestBothScheduling: while both hosts believe they run the schedules
// (a lease moving), each occurrence runs on one of them.
func TestBothScheduling(t *testing.T) {
	th := newTwoHosts(t)
	th.onA.Store(true)
	th.onB.Store(true)
	for i := 1; i <= 3; i++ {
		th.advance(time.Hour)
		a, b := th.runs(t)
		if len(a)+len(b) != i {
			t.Fatalf("after %d occurrences: runs %q and %q", i, a, b)
		}
	}
}

// TestHandoverTooLate: an occurrence passed more than handoverWindow
// before the schedules came here is not claimed: it is no longer the
// handover's, and runOnce is for a host that was down.
func TestHandoverTooLate(t *testing.T) {
	th := newTwoHosts(t)
	th.advance(time.Hour)
	th.advance(handoverWindow + time.Second)
	th.onB.Store(true)
	th.advance(claimRetry)
	if a, b := th.runs(t); len(a) != 0 || len(b) != 0 {
		t.Fatalf("runs %q and %q; want none", a, b)
	}
}

// TestClaimFailsThenWins: a claim that cannot reach the store is tried
// again, and the occurrence runs once it does.
func TestClaimFailsThenWins(t *testing.T) {
	th := newTwoHosts(t)
	th.claims.fails = 2
	th.onA.Store(true)
	th.advance(time.Hour)
	if a, _ := th.runs(t); len(a) != 0 {
		t.Fatalf("ran %q without a claim", a)
	}
	// Each pass of the scheduler from here tries the claim again, until
	// the store answers.
	th.advance(claimRetry)
	th.advance(claimRetry)
	th.a.waitEnded(1)
	if a, b := th.runs(t); !sameRuns(a, []string{"2030-01-01T13:00:00.000Z"}) || len(b) != 0 {
		t.Fatalf("runs %q and %q; want 13:00 on a", a, b)
	}
}
