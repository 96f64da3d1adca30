package journal

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// BenchmarkFollow measures a follower on another host: one journal
// appends deltas, another, connected to the same server on 127.0.0.1,
// follows the session. latency is one append at a time, from the call
// to Append until the follower hands the entry over (p50 and p99);
// throughput appends a turn's deltas per Append as fast as they are
// acked and counts what the follower delivers. local follows on the
// journal that appends, on an embedded server, for comparison.
func BenchmarkFollow(b *testing.B) {
	b.Run("latency/local", func(b *testing.B) {
		j := openBench(b, b.TempDir(), Config{})
		defer closeJournal(b, j)
		benchLatency(b, j, j)
	})
	b.Run("latency/other-host", func(b *testing.B) {
		url := benchServer(b)
		writer, reader := openURL(b, url), openURL(b, url)
		defer closeJournal(b, writer)
		defer closeJournal(b, reader)
		benchLatency(b, writer, reader)
	})
	b.Run("throughput/other-host", func(b *testing.B) {
		url := benchServer(b)
		writer, reader := openURL(b, url), openURL(b, url)
		defer closeJournal(b, writer)
		defer closeJournal(b, reader)
		benchThroughput(b, writer, reader, false)
	})
	b.Run("catchup/other-host", func(b *testing.B) {
		url := benchServer(b)
		writer, reader := openURL(b, url), openURL(b, url)
		defer closeJournal(b, writer)
		defer closeJournal(b, reader)
		benchThroughput(b, writer, reader, true)
	})
}

func benchLatency(b *testing.B, writer, reader *Journal) {
	ctx := context.Background()
	f, err := reader.Follow(ctx, s1, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	took := make([]time.Duration, 0, b.N)
	b.SetBytes(deltaBytes)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := writer.Append(ctx, s1, deltas(i, 1)...); err != nil {
			b.Fatal(err)
		}
		if _, ok := <-f.Entries(); !ok {
			b.Fatalf("follower ended: %v", f.Err())
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e3, "us-p50")
	b.ReportMetric(float64(took[len(took)*99/100])/1e3, "us-p99")
}

// benchThroughput appends b.N deltas, 20 to an Append, and follows them,
// following again (as the contract says) if the follower falls behind.
// first appends them all before the follower starts (a follower catching
// up), instead of while it follows.
func benchThroughput(b *testing.B, writer, reader *Journal, first bool) {
	ctx := context.Background()
	appended := make(chan error, 1)
	var appendTook time.Duration
	appendAll := func() {
		start := time.Now()
		for i := 0; i < b.N; i += turnDeltas {
			if _, err := writer.Append(ctx, s1, deltas(i, min(turnDeltas, b.N-i))...); err != nil {
				appended <- err
				return
			}
		}
		appendTook = time.Since(start)
		appended <- nil
	}
	b.SetBytes(deltaBytes)
	if first {
		appendAll()
	}
	b.ResetTimer()
	start := time.Now()
	if !first {
		go appendAll()
	}
	var last uint64
	got, refollows := 0, 0
	for got < b.N {
		f, err := reader.Follow(ctx, s1, last)
		if err != nil {
			b.Fatal(err)
		}
		for e := range f.Entries() {
			last = e.Seq
			if got++; got == b.N {
				break
			}
		}
		f.Close()
		if got < b.N {
			if !errors.Is(f.Err(), ErrFellBehind) {
				b.Fatalf("follower ended: %v", f.Err())
			}
			refollows++
		}
	}
	followTook := time.Since(start)
	if err := <-appended; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(got)/followTook.Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)/appendTook.Seconds(), "appends/s")
	b.ReportMetric(float64(refollows), "refollows")
}

// benchServer starts a JetStream server on 127.0.0.1 for the benchmark
// and returns its URL.
func benchServer(b *testing.B) string {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoSigs: true, NoLog: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	srv.Start()
	b.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		b.Fatal("NATS server not ready")
	}
	return srv.ClientURL()
}

func openURL(b *testing.B, url string) *Journal {
	b.Helper()
	j, err := Open(context.Background(), Config{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	return j
}
