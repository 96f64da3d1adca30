package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// The figures of hosts sharing sessions (docs/CLUSTER.md, "Figures of the
// host wiring"): what forwarding adds to a client's action and command,
// listing a cluster's sessions, and how long a session takes to answer
// again once its host died.

var clusterSessions = flag.Int("cluster-sessions", 1000, "how many session records BenchmarkClusterListing spreads over three hosts")

// quiet has a benchmark's host log nothing: a benchmark prints its log.
func quiet(o *host.Options) { o.Logger = slog.New(slog.DiscardHandler) }

// quantile is the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clientID is the id dialBench gave c.
func (c *benchClient) clientID() string { return fmt.Sprintf("bench-%p", c) }

// dispatchEcho sends a client action and reads frames until its echo (the
// envelope carrying this client's origin and clientSeq) comes back,
// failing if it was refused.
func (c *benchClient) dispatchEcho(b *testing.B, channel string, a protocol.Action) {
	b.Helper()
	c.clientSeq++
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "dispatchAction", "params": map[string]any{
		"channel": channel, "clientSeq": c.clientSeq, "action": a,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	want := []byte(fmt.Sprintf(`"clientId":%q,"clientSeq":%d}`, c.clientID(), c.clientSeq))
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			b.Fatalf("waiting for the echo of action %d: %v", c.clientSeq, err)
		}
		if !bytes.Contains(data, want) {
			continue
		}
		if bytes.Contains(data, []byte(`"rejectionReason"`)) {
			b.Fatalf("the action was refused: %.300s", data)
		}
		return
	}
}

// forwardedSetup starts hosts A and B on one node and a session made
// through A in a folder only B reaches, so placed on B, with a finished
// turn; cb is a client of B and ca one of A, each subscribed to the
// session (A's through its mirror of B's journal).
func forwardedSetup(b *testing.B) (ca, cb *benchClient, session, chat string) {
	b.Helper()
	nc := clustertest.Start(b, 1)
	a := startClusterHost(b, nc, 0, "a", quiet)
	hb := startClusterHost(b, nc, 0, "b", quiet)
	session = "ahp-session:/bench"
	chat = protocol.DefaultChatURI(session)
	// Made, and its first turn sent, by a client of A: until that turn it
	// is its maker's alone.
	maker := a.client("maker")
	maker.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + hb.work}})
	startTakenRemote(b, maker, hb, session, chat, "t1", "say hello")
	if st, on := clusterStatus(b, maker, session); st != "active" || on != "b" {
		b.Fatalf("the session is %s on %q, want active on b", st, on)
	}
	ca, cb = dialBench(b, a.url), dialBench(b, hb.url)
	cb.must(b, "subscribe", map[string]any{"channel": session})
	ca.must(b, "subscribe", map[string]any{"channel": session})
	return ca, cb, session, chat
}

// BenchmarkClusterForwarded measures, as a client sees it, what sharing
// sessions adds to a request about a session another host runs. Hosts A
// and B share one NATS node; the session runs on B. Each op sends the
// same request once through B's own client (local) and once through A's
// (forwarded to B); the figures are each one's p50 and p99, and the p50
// added by forwarding.
//
//   - action: a session/titleChanged with a new title, until its echo
//     comes back: on B, from B's bus; through A, forwarded to B, appended
//     to the journal there, and followed back by A's mirror.
//   - sessionStatus, fetchTurns: a command's round trip (A asks the
//     cluster who holds the session, then forwards).
func BenchmarkClusterForwarded(b *testing.B) {
	b.Run("action", func(b *testing.B) {
		ca, cb, session, _ := forwardedSetup(b)
		n := 0
		var local, fwd []time.Duration
		for b.Loop() {
			n++
			t0 := time.Now()
			cb.dispatchEcho(b, session, &protocol.SessionTitleChangedAction{Title: fmt.Sprintf("local %d", n)})
			t1 := time.Now()
			ca.dispatchEcho(b, session, &protocol.SessionTitleChangedAction{Title: fmt.Sprintf("forwarded %d", n)})
			local, fwd = append(local, t1.Sub(t0)), append(fwd, time.Since(t1))
		}
		reportPair(b, local, fwd)
	})
	for _, cmd := range []struct {
		name, method string
		chat         bool
	}{{"sessionStatus", "ahpd/sessionStatus", false}, {"fetchTurns", "fetchTurns", true}} {
		b.Run(cmd.name, func(b *testing.B) {
			ca, cb, session, chat := forwardedSetup(b)
			params := map[string]any{"channel": session}
			if cmd.chat {
				params["channel"] = chat
			}
			var local, fwd []time.Duration
			for b.Loop() {
				t0 := time.Now()
				cb.must(b, cmd.method, params)
				t1 := time.Now()
				ca.must(b, cmd.method, params)
				local, fwd = append(local, t1.Sub(t0)), append(fwd, time.Since(t1))
			}
			reportPair(b, local, fwd)
		})
	}
}

// reportPair reports the local and forwarded latencies' quantiles.
func reportPair(b *testing.B, local, fwd []time.Duration) {
	lp50, lp99 := quantile(local, 0.5), quantile(local, 0.99)
	fp50, fp99 := quantile(fwd, 0.5), quantile(fwd, 0.99)
	b.ReportMetric(micros(lp50), "µs/local-p50")
	b.ReportMetric(micros(lp99), "µs/local-p99")
	b.ReportMetric(micros(fp50), "µs/fwd-p50")
	b.ReportMetric(micros(fp99), "µs/fwd-p99")
	b.ReportMetric(micros(fp50-lp50), "µs/added-p50")
}

// putRecords writes n session records into the cluster's records bucket
// as hosts a, b and c would have (each on its node, a third each, its id
// as writer), then lets the writers go, so that the hosts started after
// load them all.
func putRecords(b *testing.B, nc *clustertest.Cluster, n int) {
	b.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, 3*8)
	for w, id := range []string{"a", "b", "c"} {
		conn, err := cluster.Dial(ctx, nc.Config(w), "writer "+id)
		if err != nil {
			b.Fatal(err)
		}
		m, err := cluster.Join(ctx, conn, cluster.Config{HostID: id, HostTTL: time.Second, LeaseTTL: time.Second})
		if err != nil {
			conn.Close()
			b.Fatal(err)
		}
		var mine sync.WaitGroup
		for g := range 8 { // eight writes in flight a host
			mine.Add(1)
			go func() {
				defer mine.Done()
				for i := w + 3*g; i < n; i += 3 * 8 {
					sid := fmt.Sprintf("s%05d", i)
					data := sessionRecord(b, sid, fmt.Sprintf("/srv/%s/repo%d", id, i%7), base.Add(time.Duration(i)*time.Minute))
					if _, err := m.PutRecord(ctx, sid, data); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine.Wait()
			if err := m.Close(ctx); err != nil {
				errs <- err
			}
			conn.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkClusterListing lists the sessions of a cluster of three hosts
// (-cluster-sessions, 1,000 by default; 10,000 for the documented
// figure), whose records are in the cluster's records bucket (three NATS
// nodes, a host on each). It reports how long each host took to start
// (host.New: reading every record from the bucket and making each a
// sleeping session), and a client's full listing of them from one host
// (listSessions in pages of 500 until there is no nextCursor), per op,
// and the heap the three hosts took for the sessions, per session per
// host. The three hosts share the benchmark's process, and so its heap:
// the collector scans all three's sessions during a listing, which makes
// the listing slower than on a host of its own.
func BenchmarkClusterListing(b *testing.B) {
	n := *clusterSessions
	nc := clustertest.Start(b, 3)
	putRecords(b, nc, n)
	heapBefore := liveHeap()
	var starts []time.Duration
	var first *clusterHost
	for node, id := range []string{"a", "b", "c"} {
		// The option runs just before host.New; the host's server starts
		// after it, which takes microseconds.
		var began time.Time
		ch := startClusterHost(b, nc, node, id, quiet, func(*host.Options) { began = time.Now() })
		starts = append(starts, time.Since(began))
		if first == nil {
			first = ch
		}
	}
	perSession := float64(liveHeap()-heapBefore) / float64(3*n)
	c := dialBench(b, first.url)
	// list pages through the listing; checked, it decodes every page and
	// returns the sessions listed, else it reads no more than the cursor,
	// so that the figure is the host's.
	list := func(checked bool) int {
		rows := 0
		params := map[string]any{"channel": protocol.RootURI, "limit": 500}
		for {
			data := c.roundTrip(b, "listSessions", params)
			if !bytes.Contains(data[:min(len(data), 64)], []byte(`"result":`)) {
				b.Fatalf("listSessions: %.300s", data)
			}
			if checked {
				var res struct {
					Result protocol.ListSessionsResult `json:"result"`
				}
				if err := json.Unmarshal(data, &res); err != nil {
					b.Fatal(err)
				}
				rows += len(res.Result.Items)
			}
			_, rest, ok := bytes.Cut(data, []byte(`"nextCursor":"`))
			if !ok {
				return rows
			}
			cursor, _, _ := bytes.Cut(rest, []byte(`"`))
			params["cursor"] = string(cursor)
		}
	}
	if got := list(true); got != n {
		b.Fatalf("the listing has %d sessions, want %d", got, n)
	}
	for b.Loop() {
		list(false)
	}
	b.ReportMetric(millis(b.Elapsed())/float64(b.N), "ms/listing")
	b.ReportMetric(millis(quantile(starts, 0.5)), "ms/start-p50")
	b.ReportMetric(millis(slices.Max(starts)), "ms/start-max")
	b.ReportMetric(float64(n), "sessions")
	b.ReportMetric(perSession/1024, "KiB-heap/session")
}

// iteration is a benchmark's testing.TB whose cleanups run when one
// iteration is done rather than when the benchmark ends: each failover
// starts a cluster and three hosts, and keeping every iteration's until
// the end runs out of file descriptors.
type iteration struct {
	*testing.B
	mu       sync.Mutex
	cleanups []func()
}

func newIteration(b *testing.B) *iteration {
	it := &iteration{B: b}
	b.Cleanup(it.done) // one that failed half-way
	return it
}

func (it *iteration) Cleanup(f func()) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.cleanups = append(it.cleanups, f)
}

// done runs the cleanups, the last registered first.
func (it *iteration) done() {
	it.mu.Lock()
	list := it.cleanups
	it.cleanups = nil
	it.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i]()
	}
}

// BenchmarkClusterFailover measures a session answering again after its
// host died. Hosts A, B and C share one node (lease and host TTL 1 s, as
// the harness sets); B and C reach the session's folder, A does not. B
// runs the session, A's client watches it; B crashes (its connection to
// the cluster goes first). The op: from the crash until a turn sent
// through A has ended on C. It is sent once C's watch of the leases
// (cluster Freed) tells it the session's lease ended, so the figure
// splits into the lease running out (crash to Freed) and the wake (Freed
// to the turn's end: A finds nobody holds it, places it, C takes it,
// rebuilds it from its record and journal and runs the turn). Each op
// starts fresh hosts; run with a small -benchtime such as 5x.
func BenchmarkClusterFailover(b *testing.B) {
	// The crashed host's member, which logs to the default logger, says
	// until the benchmark ends that it cannot renew.
	was := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(was) })
	var total, lease, wake []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		b := newIteration(b)
		nc := clustertest.Start(b, 1)
		shared := b.TempDir()
		a := startClusterHost(b, nc, 0, "a", quiet)
		hb := startClusterHostReaching(b, nc, 0, "b", shared, quiet)
		hc := startClusterHostReaching(b, nc, 0, "c", shared, quiet)
		ca := a.client("ca")
		session := "ahp-session:/moving"
		chat := protocol.DefaultChatURI(session)
		ca.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + shared}})
		startTakenRemote(b, ca, hb, session, chat, "t1", "say one")
		if st, on := clusterStatus(b, ca, session); st != "active" || on != "b" {
			b.Fatalf("the session is %s on %q, want active on b", st, on)
		}
		ca.Subscribe(session)
		ca.Subscribe(chat)
		send(b, ca, chat, "t2", "say two")
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		freed, err := hc.member.Freed(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()

		t0 := time.Now()
		hb.crash()
		for id := range freed {
			if id == "moving" {
				break
			}
		}
		t1 := time.Now()
		st := send(b, ca, chat, "t3", "say three")
		t2 := time.Now()

		b.StopTimer()
		cancel()
		if st, on := clusterStatus(b, ca, session); st != "active" || on != "c" {
			b.Fatalf("after the failover the session is %s on %q, want active on c", st, on)
		}
		if len(st.Turns) != 3 {
			b.Fatalf("the session has %d turns after the failover, want 3", len(st.Turns))
		}
		total, lease, wake = append(total, t2.Sub(t0)), append(lease, t1.Sub(t0)), append(wake, t2.Sub(t1))
		b.done()
		b.StartTimer()
	}
	b.ReportMetric(millis(quantile(total, 0.5)), "ms/failover-p50")
	b.ReportMetric(millis(slices.Max(total)), "ms/failover-max")
	b.ReportMetric(millis(quantile(lease, 0.5)), "ms/lease-out-p50")
	b.ReportMetric(millis(quantile(wake, 0.5)), "ms/wake-p50")
	b.ReportMetric(millis(slices.Max(wake)), "ms/wake-max")
}
