package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster/clustertest"
)

// BenchmarkLeaseAcquireRelease measures taking a free session and giving
// it back, on one node (R1) and through a 3-node cluster (R3, the member
// on a node that may not lead the bucket).
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", nodes), func(b *testing.B) {
			c := clustertest.Start(b, nodes)
			m := benchJoin(b, c, 0, "bench")
			ctx := context.Background()
			i := 0
			for b.Loop() {
				l, err := m.Acquire(ctx, fmt.Sprintf("session-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/acquire+release")
		})
	}
}

// BenchmarkRequestAcrossNodes measures a forwarded request's round trip, a
// host on node 0 to a host on node 2, 1 KiB each way.
func BenchmarkRequestAcrossNodes(b *testing.B) {
	c := clustertest.Start(b, 3)
	client := benchJoin(b, c, 0, "client")
	server := benchJoin(b, c, 2, "server")
	if err := server.Serve(func(_ context.Context, req []byte) ([]byte, error) { return req, nil }); err != nil {
		b.Fatal(err)
	}
	c.WaitInterest(0, client.Subject("server"))
	req := make([]byte, 1024)
	ctx := context.Background()
	for b.Loop() {
		if _, err := client.Request(ctx, "server", req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/round-trip")
}

// BenchmarkKVSize measures what 10,000 held sessions (names of 50 bytes,
// as channel URIs are) and 100 host records take in their buckets, per
// replica.
func BenchmarkKVSize(b *testing.B) {
	for b.Loop() {
		c := clustertest.Start(b, 1)
		m := benchJoin(b, c, 0, "h000")
		ctx := context.Background()
		var wg sync.WaitGroup
		sessions := make(chan string)
		for range 16 {
			wg.Go(func() {
				for s := range sessions {
					if _, err := m.Acquire(ctx, s); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for i := range 10000 {
			sessions <- fmt.Sprintf("ahp-session://%036d", i)
		}
		close(sessions)
		wg.Wait()
		for i := 1; i < 100; i++ {
			benchJoin(b, c, 0, fmt.Sprintf("h%03d", i))
		}
		leases, err := m.js.Stream(ctx, "KV_"+m.leasesKV.Bucket())
		if err != nil {
			b.Fatal(err)
		}
		hosts, err := m.js.Stream(ctx, "KV_"+m.hosts.Bucket())
		if err != nil {
			b.Fatal(err)
		}
		li, hi := leases.CachedInfo(), hosts.CachedInfo()
		if li.State.Msgs != 10000 || hi.State.Msgs != 100 {
			b.Fatalf("%d leases and %d hosts stored", li.State.Msgs, hi.State.Msgs)
		}
		b.ReportMetric(float64(li.State.Bytes), "lease-bytes/10k-sessions")
		b.ReportMetric(float64(hi.State.Bytes), "host-bytes/100-hosts")
	}
}

// benchJoin joins with the default (long) TTLs and the real clock, so that
// nothing expires during a run.
func benchJoin(b *testing.B, c *clustertest.Cluster, node int, id string) *Member {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, c.Connect(node), Config{HostID: id, Replicas: c.Nodes()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return m
}
