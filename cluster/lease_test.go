package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/internal/testwait"
)

// One host acquires; another is told who holds it; after the release the
// other acquires at once.
func TestAcquireHolderRelease(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", true, Config{})
	b := join(t, c, 2, "b", true, Config{})
	session := "ahp-session://" + strings.Repeat("x", 40)

	if h, err := b.Holder(ctx(t), session); err != nil || h != "" {
		t.Fatalf("Holder of a free session = %q, %v", h, err)
	}
	la, err := a.Acquire(ctx(t), session)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx(t), session)
	heldBy(t, err, "a")
	_, err = a.Acquire(ctx(t), session)
	heldBy(t, err, "a")
	if h, err := b.Holder(ctx(t), session); err != nil || h != "a" {
		t.Fatalf("Holder = %q, %v, want a", h, err)
	}
	if err := la.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Holder(ctx(t), session); err != nil || h != "" {
		t.Fatalf("Holder after release = %q, %v", h, err)
	}
	lb, err := b.Acquire(ctx(t), session)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if err := la.Renew(ctx(t)); !errors.Is(err, ErrLost) {
		t.Errorf("renewing a released lease = %v, want ErrLost", err)
	}
	if lb.Session() != session {
		t.Errorf("Session() = %q", lb.Session())
	}
}

func TestAcquireRefusesBadSessionNames(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "a", true, Config{})
	for _, s := range []string{"", strings.Repeat("s", MaxSessionBytes+1)} {
		if _, err := a.Acquire(ctx(t), s); !errors.Is(err, ErrBadName) || len(err.Error()) > 200 {
			t.Errorf("Acquire(%d bytes) = %v, want a short ErrBadName", len(s), err)
		}
		if _, err := a.Holder(ctx(t), s); !errors.Is(err, ErrBadName) {
			t.Errorf("Holder(%d bytes) = %v, want ErrBadName", len(s), err)
		}
	}
	// The longest name is fine, and any bytes are.
	for _, s := range []string{strings.Repeat("s", MaxSessionBytes), "a b/c.d*>é\x00"} {
		if _, err := a.Acquire(ctx(t), s); err != nil {
			t.Errorf("Acquire(%q...) = %v", s[:min(10, len(s))], err)
		}
	}
}

var raceRounds = flag.Int("cluster-races", 20, "races for one session per case in TestRacingHostsExactlyOneWins")

// Hosts racing for one session: exactly one wins, every time, whether the
// session was never held or was released (its key is then a marker), and
// the losers are told the winner.
func TestRacingHostsExactlyOneWins(t *testing.T) {
	c := clustertest.Start(t, 3)
	var hosts []*joined
	for i := range 10 {
		hosts = append(hosts, join(t, c, i%3, fmt.Sprintf("h%d", i), true, Config{}))
	}
	for _, n := range []int{2, 10} {
		t.Run(fmt.Sprintf("%d hosts", n), func(t *testing.T) {
			for round := range *raceRounds {
				session := fmt.Sprintf("race-%d-%d", n, round)
				if round%2 == 1 { // race on a released session
					l, err := hosts[0].Acquire(ctx(t), session)
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Release(ctx(t)); err != nil {
						t.Fatal(err)
					}
				}
				race(t, hosts[:n], session)
			}
		})
	}
}

// race has hosts acquire session at once and checks that exactly one won.
func race(t *testing.T, hosts []*joined, session string) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	leases := make([]*Lease, len(hosts))
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Go(func() {
			<-start
			leases[i], errs[i] = h.Acquire(ctx(t), session)
		})
	}
	close(start)
	wg.Wait()
	winner := ""
	for i, h := range hosts {
		if errs[i] == nil {
			if winner != "" {
				t.Fatalf("%s: both %s and %s acquired it", session, winner, h.HostID())
			}
			winner = h.HostID()
		}
	}
	if winner == "" {
		t.Fatalf("%s: nobody acquired it: %v", session, errs)
	}
	for i := range hosts {
		if errs[i] != nil {
			heldBy(t, errs[i], winner)
		}
	}
	if got, err := hosts[0].Holder(ctx(t), session); err != nil || got != winner {
		t.Fatalf("%s: Holder = %q, %v, want %s", session, got, err, winner)
	}
}

// When the holder dies, in any of three ways, its lease expires within the
// lease time and another host acquires the session.
func TestDeadHoldersLeaseExpires(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(c *clustertest.Cluster, holder *joined)
	}{
		{"stops renewing", func(*clustertest.Cluster, *joined) {}}, // its fake clock never moves
		{"connection closed", func(_ *clustertest.Cluster, h *joined) { h.nc.Close() }},
		{"its NATS node stopped", func(c *clustertest.Cluster, h *joined) { c.Stop(h.node) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.Start(t, 3)
			// The holder is on a node that leads neither the leases
			// bucket nor JetStream's meta group, so that stopping it
			// stops only the holder (TestLeaseSurvivesItsNodeStopping
			// stops the bucket's leader).
			lead := leaderNode(t, join(t, c, 0, "probe", true, Config{}))
			meta := metaNode(t, c)
			nodes := []int{0, 1, 2}
			for _, n := range nodes {
				if n != lead && n != meta {
					nodes = []int{n, lead, meta}
					break
				}
			}
			holder := join(t, c, nodes[0], "holder", true, Config{})
			other := join(t, c, nodes[1], "other", false, Config{})
			third := join(t, c, nodes[2], "third", false, Config{})
			l, err := holder.Acquire(ctx(t), "s")
			if err != nil {
				t.Fatal(err)
			}
			tc.kill(c, holder)
			// Watched from after the death: a watch begun before a node
			// stops may stall for 20 s (nats.go's ordered consumer), though
			// the server expires the key on time.
			w := watchKey(t, other.leasesKV, sessionKey("s"))
			took := waitGone(t, w)
			t.Logf("the lease expired %v after the holder died (TTL %v)", took, testTTL)
			if h, err := other.Holder(ctx(t), "s"); err != nil || h != "" {
				t.Fatalf("Holder after expiry = %q, %v", h, err)
			}
			// The survivors race for it (a compare-and-set on the expiry's
			// marker): one wins.
			race(t, []*joined{other, third}, "s")
			if tc.name == "stops renewing" {
				// The holder wakes up: its next renewal tells it.
				if err := l.Renew(ctx(t)); !errors.Is(err, ErrLost) {
					t.Fatalf("the old holder's Renew = %v, want ErrLost", err)
				}
				select {
				case <-l.Lost():
				default:
					t.Fatal("Lost() not closed after ErrLost")
				}
				if err := l.Release(ctx(t)); !errors.Is(err, ErrLost) {
					t.Errorf("the old holder's Release = %v, want ErrLost", err)
				}
			}
		})
	}
}

// A holder that lost its lease to an expiry, even one nobody followed by
// acquiring, finds out on its next renewal, and its heartbeat tells it too.
func TestLostLeaseIsFoundOnRenew(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "a", true, Config{})
	l, err := a.Acquire(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	w := watchKey(t, a.leasesKV, sessionKey("s"))
	waitPut(t, w)
	waitGone(t, w)              // a's clock stood still: no renewal
	a.clk.Advance(a.interval()) // the heartbeat now renews, and fails
	select {
	case <-l.Lost():
	case <-time.After(testwait.Hang):
		t.Fatal("the heartbeat did not find the lease lost")
	}
	if err := l.Renew(ctx(t)); !errors.Is(err, ErrLost) {
		t.Fatalf("Renew = %v, want ErrLost", err)
	}
	if _, err := a.Acquire(ctx(t), "s"); err != nil {
		t.Fatalf("acquiring it again: %v", err)
	}
}

// A holder that cannot reach NATS keeps its lease until its deadline and
// then finds it lost, without waiting for NATS to answer.
func TestUnrenewableLeaseIsLostAtItsDeadline(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "a", true, Config{})
	l, err := a.Acquire(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(testTTL); !l.Deadline().Equal(want) {
		t.Fatalf("Deadline = %v, want %v", l.Deadline(), want)
	}
	a.nc.Close()
	if err := l.Renew(ctx(t)); err == nil || errors.Is(err, ErrLost) {
		t.Fatalf("Renew without NATS = %v, want a plain failure", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("lost before its deadline")
	default:
	}
	a.clk.Advance(testTTL) // the heartbeat wakes at the deadline
	select {
	case <-l.Lost():
	case <-time.After(testwait.Hang):
		t.Fatal("not lost at its deadline")
	}
}

// The member's heartbeat keeps its leases alive past their TTL.
func TestRenewerKeepsLeasesAlive(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", false, Config{})
	b := join(t, c, 2, "b", true, Config{})
	if _, err := a.Acquire(ctx(t), "s"); err != nil {
		t.Fatal(err)
	}
	w := watchKey(t, b.leasesKV, sessionKey("s"))
	first := waitPut(t, w)
	for {
		e := next(t, w)
		if e.Operation() != jetstream.KeyValuePut {
			t.Fatalf("the lease was removed (%v) while its holder renewed it", e.Operation())
		}
		if e.Created().Sub(first.Created()) > 2*testTTL {
			break
		}
	}
	_, err := b.Acquire(ctx(t), "s")
	heldBy(t, err, "a")
}

// A holder whose NATS node stops, that node leading the leases bucket
// too, reconnects to another node (its client learned the cluster's other
// addresses), the bucket elects another leader, and the holder renews its
// lease: losing a node is not losing a host. A renewal is a compare-and-set
// on the holder's last revision, so one succeeding after the stop proves
// the key was neither expired nor taken meanwhile.
func TestLeaseSurvivesItsNodeStopping(t *testing.T) {
	c := clustertest.Start(t, 3)
	// The server's TTL: a new leader takes about 0.5 s, many times that on
	// a loaded machine, and the renewal must come before the key expires.
	const ttl = 30 * time.Second
	node := leaderNode(t, join(t, c, 0, "probe", true, Config{}))
	holder := join(t, c, node, "holder", true, Config{LeaseTTL: ttl, HostTTL: ttl})
	other := join(t, c, (node+1)%3, "other", true, Config{})
	l, err := holder.Acquire(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(node)
	// Renew as the heartbeat would, paced by a ticker, until the cluster
	// answers again (no responders while the bucket elects a leader).
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(testwait.Hang)
	for {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := l.Renew(rctx)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, ErrLost) {
			t.Fatalf("the lease was lost when its holder's node stopped: %v", err)
		}
		select {
		case <-tick.C:
		case <-giveUp:
			t.Fatalf("no renewal after the node stopped: %v", err)
		}
	}
	if h, err := other.Holder(ctx(t), "s"); err != nil || h != "holder" {
		t.Fatalf("Holder = %q, %v", h, err)
	}
	if st, err := other.js.Stream(ctx(t), "KV_"+other.leasesKV.Bucket()); err != nil || st.CachedInfo().Cluster.Leader == fmt.Sprintf("n%d", node) {
		t.Fatalf("the stopped node still leads the bucket (%v)", err)
	}
}

// The heartbeat beats every interval, every second while its writes fail,
// and at a lease's deadline when that comes first.
func TestNextBeat(t *testing.T) {
	c := clustertest.Start(t, 1)
	a := join(t, c, 0, "a", true, Config{LeaseTTL: 9 * time.Second, HostTTL: 6 * time.Second})
	if got, want := a.nextBeat(false), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("next beat = %v, want an interval (a third of the shorter TTL) on, %v", got, want)
	}
	if got, want := a.nextBeat(true), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("next beat while failing = %v, want %v", got, want)
	}
	if _, err := a.Acquire(ctx(t), "s"); err != nil {
		t.Fatal(err)
	}
	a.nc.Close()                           // so that no renewal moves the deadline
	a.clk.Advance(8500 * time.Millisecond) // the heartbeat runs, and fails
	if got, want := a.nextBeat(true), t0.Add(9*time.Second); !got.Equal(want) {
		t.Errorf("next beat with a lease's deadline in 0.5 s = %v, want the deadline %v", got, want)
	}
}

// TestHolderWithoutLeader: while the leases' bucket has no leader (the
// node it led on died, and too few are left to elect another), Holder
// does not wait for one: it names the host last seen holding the
// session, at once, for the caller to ask it.
func TestHolderWithoutLeader(t *testing.T) {
	c := clustertest.Start(t, 3)
	lead := leaderNode(t, join(t, c, 0, "probe", true, Config{}))
	node := (lead + 1) % 3 // stays up, alone
	a := join(t, c, node, "a", true, Config{})
	b := join(t, c, node, "b", true, Config{})
	if _, err := b.Acquire(ctx(t), "s1"); err != nil {
		t.Fatal(err)
	}
	if h, err := a.Holder(ctx(t), "s1"); err != nil || h != "b" {
		t.Fatalf("Holder = %q, %v; want b", h, err)
	}
	// The leader's node and another go: the bucket has no leader, and
	// none can be elected.
	c.Stop(lead)
	c.Stop((lead + 2) % 3)
	start := time.Now()
	h, err := a.Holder(ctx(t), "s1")
	took := time.Since(start)
	t.Logf("Holder answered in %v without a leader", took)
	if err != nil || h != "b" {
		t.Fatalf("Holder without a leader = %q, %v; want b, the host last seen holding it", h, err)
	}
	// A generous bound: a second for the leader, and the replicas' answer.
	if took > 5*time.Second {
		t.Errorf("Holder took %v without a leader", took)
	}
	// A session nobody was seen holding is not guessed at.
	if h, err := a.Holder(ctx(t), "s2"); h != "" {
		t.Errorf("Holder of a session never seen = %q (%v), want none", h, err)
	}
}

// TestCloseWithoutQuorum: a member leaving a cluster that has lost its
// quorum (the last NATS node of three) does not wait for writes that
// cannot be acknowledged: Close returns within about a second, saying
// what it left undone and when that undoes itself.
func TestCloseWithoutQuorum(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", false, Config{})
	if _, err := a.Acquire(ctx(t), "s1"); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)
	start := time.Now()
	closing, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Close(closing)
	took := time.Since(start)
	t.Logf("Close without a quorum took %v: %v", took, err)
	var left *LeaveError
	if !errors.As(err, &left) || left.Leases != 1 || !left.Record || !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("Close = %v, want a LeaveError for 1 lease and the record, for no quorum", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "release 1 session lease(s)") || !strings.Contains(msg, "remove this host's record (it expires within 1s)") {
		t.Errorf("Close's error says %q", msg)
	}
	// Generous: the quorum's question takes a second.
	if took > 5*time.Second {
		t.Errorf("Close took %v without a quorum", took)
	}
}
