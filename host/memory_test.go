package host_test

import (
	"bufio"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestSleepLetsGoOfTheReplay puts a session to sleep: the changes the host
// kept of it for reconnecting clients go with its turns, so a client that
// missed some of them is sent snapshots, which hold its turns, read back
// from the transcript. A client that missed only later changes is still
// replayed them. Then the host returns the heap to the system.
func TestSleepLetsGoOfTheReplay(t *testing.T) {
	t.Parallel()
	slow(t)
	releases := make(chan struct{}, 1)
	th := startHost(t, "", func(o *host.Options) { host.WithReleases(o, releases) })
	probe := hosttest.Dial(t, th.url)
	before := probe.Initialize("probe").ServerSeq
	probe.Close()

	c := th.client("c1")
	_, chat := th.newSession(c, "sleeper", nil)
	send(t, c, chat, "t1", "say something to remember")
	_, other := th.newSession(c, "awake", nil)
	send(t, c, other, "t1", "say hi")
	th.leave(c, "c1")
	suspendAsleep(t, th.client("c2"), "ahp-session:/sleeper")

	probe = hosttest.Dial(t, th.url)
	after := probe.Initialize("probe2").ServerSeq
	probe.Close()
	w := th.client("writer")
	w.Subscribe(other)
	send(t, w, other, "t2", "say more")

	// Missed some of the sleeper's changes: snapshots.
	r := hosttest.Dial(t, th.url)
	res := r.Reconnect("c1", before, []string{chat, other})
	snaps, ok := res.(*protocol.ReconnectSnapshotResult)
	if !ok {
		t.Fatalf("got %T, want snapshots", res)
	}
	for _, snap := range snaps.Snapshots {
		cs := snap.State.(*protocol.ChatState)
		if snap.Resource == chat && (len(cs.Turns) != 1 || !strings.Contains(text(cs.Turns[0].ResponseParts), "something to remember")) {
			t.Errorf("the sleeper's chat comes back with %d turns", len(cs.Turns))
		}
	}
	// Missed only what came after: a replay.
	r = hosttest.Dial(t, th.url)
	res = r.Reconnect("c1", after, []string{other})
	replay, ok := res.(*protocol.ReconnectReplayResult)
	if !ok || len(replay.Actions) == 0 {
		t.Fatalf("got %T (%v), want a replay of turn t2", res, res)
	}

	// The heap the sleeper left is given back once the host has been
	// quiet a moment, and counted.
	select {
	case <-releases:
	case <-time.After(hosttest.Timeout):
		t.Fatal("the memory was never released")
	}
	if n := released(t, th); n == 0 {
		t.Error("a release is not counted in ahpd_memory_released_total")
	}
}

// released reads ahpd_memory_released_total off the host's metrics.
func released(t *testing.T, th *testHost) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	th.h.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ahpd_memory_released_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no ahpd_memory_released_total")
	return 0
}
