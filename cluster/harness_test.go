package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTTL is the hosts' and leases' TTL in tests: the server's least.
const testTTL = time.Second

var t0 = time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)

// joined is a member of a test cluster with its own connection.
type joined struct {
	*Member
	nc   *nats.Conn
	node int         // the node it connected to
	clk  *clock.Fake // nil when the member runs on the real clock
}

// join connects to node and joins as id with cfg (HostID, replicas and
// TTLs filled in). With fake set, the member's clock is a fake one the test
// advances; left alone, the member never renews anything. Closed when the
// test ends.
func join(t *testing.T, c *clustertest.Cluster, node int, id string, fake bool, cfg Config) *joined {
	t.Helper()
	nc := c.Connect(node)
	cfg.HostID = id
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = min(3, c.Nodes())
	}
	if cfg.HostTTL == 0 {
		cfg.HostTTL = testTTL
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = testTTL
	}
	j := &joined{nc: nc, node: node}
	if fake {
		j.clk = clock.NewFake(t0)
		cfg.Clock = j.clk
	}
	m, err := Join(clustertest.WaitContext(t), nc, cfg)
	if err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	j.Member = m
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx) // may fail: tests cut members off
	})
	return j
}

// watchKey watches one key of kv; stopped when the test ends.
func watchKey(t *testing.T, kv jetstream.KeyValue, key string) jetstream.KeyWatcher {
	t.Helper()
	w, err := kv.Watch(clustertest.WaitContext(t), key)
	if err != nil {
		t.Fatalf("watching %s: %v", key, err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// next is the watcher's next entry (skipping the end-of-initial-values
// nil), failing the test after testwait.Hang.
func next(t *testing.T, w jetstream.KeyWatcher) jetstream.KeyValueEntry {
	t.Helper()
	timeout := time.NewTimer(testwait.Hang)
	defer timeout.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				t.Fatal("watcher closed")
			}
			if e != nil {
				return e
			}
		case <-timeout.C:
			t.Fatal("no change to the watched key")
		}
	}
}

// waitGone waits until the watched key's newest entry is a removal (an
// expiry's marker or a purge) and returns how long that took.
func waitGone(t *testing.T, w jetstream.KeyWatcher) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if e := next(t, w); e.Operation() != jetstream.KeyValuePut {
			return time.Since(start)
		}
	}
}

// waitPut waits for the watched key's next put (a renewal).
func waitPut(t *testing.T, w jetstream.KeyWatcher) jetstream.KeyValueEntry {
	t.Helper()
	for {
		if e := next(t, w); e.Operation() == jetstream.KeyValuePut {
			return e
		}
	}
}

func ctx(t *testing.T) context.Context { return clustertest.WaitContext(t) }

// heldBy fails the test unless err says holder holds the session.
func heldBy(t *testing.T, err error, holder string) {
	t.Helper()
	var held *HeldError
	if !errors.Is(err, ErrHeld) || !errors.As(err, &held) || held.Holder != holder {
		t.Fatalf("err = %v, want the session held by %s", err, holder)
	}
}

// leaderNode is the index of the node leading m's leases bucket (nodes
// are named n0, n1, ...).
func leaderNode(t *testing.T, m *joined) int {
	t.Helper()
	st, err := m.js.Stream(ctx(t), "KV_"+m.leasesKV.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	ci := st.CachedInfo().Cluster
	if ci == nil || len(ci.Leader) < 2 {
		t.Fatalf("the leases bucket has no leader: %+v", ci)
	}
	n, err := strconv.Atoi(ci.Leader[1:])
	if err != nil {
		t.Fatalf("leader %q is not a clustertest node", ci.Leader)
	}
	return n
}

// metaNode is the index of the node leading JetStream's meta group (which
// creates streams and consumers, watchers' included).
func metaNode(t *testing.T, c *clustertest.Cluster) int {
	t.Helper()
	for i := range c.Nodes() {
		if srv := c.Server(i); srv != nil && srv.JetStreamIsLeader() {
			return i
		}
	}
	t.Fatal("no JetStream meta leader")
	return -1
}
