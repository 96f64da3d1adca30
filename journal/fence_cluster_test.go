package journal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/journal"
)

// TestFenceOnACluster: the fence on a three-node cluster, the stream
// replicated on all three, two journals each on a node of its own, as two
// hosts: batches of several entries and a chunked entry go through under
// a claim, and none of the old claim's after another's.
func TestFenceOnACluster(t *testing.T) {
	nc := clustertest.Start(t, 3)
	ctx := clustertest.WaitContext(t)
	open := func(i int) *journal.Journal {
		j, err := journal.Open(ctx, journal.Config{URL: nc.URL(i), User: clustertest.User, Password: clustertest.Password, Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close(context.Background()) })
		return j
	}
	a, b := open(0), open(1)
	const s = "ahp-session:/fenced"
	big := bytes.Repeat([]byte("x"), 3<<20)
	batch := [][]byte{[]byte("one"), []byte("two"), big, []byte("three")}
	if _, err := a.Claim(ctx, s, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, s, batch...); err != nil {
		t.Fatalf("a's batch under its claim: %v", err)
	}
	if _, err := b.Claim(ctx, s, "b"); err != nil {
		t.Fatal(err)
	}
	if seqs, err := a.Append(ctx, s, batch...); !errors.Is(err, journal.ErrFenced) || len(seqs) != 0 {
		t.Fatalf("a's batch after b's claim: %d kept, %v; want none, ErrFenced", len(seqs), err)
	}
	if _, err := b.Append(ctx, s, []byte("b's"), big); err != nil {
		t.Fatalf("b's batch under its claim: %v", err)
	}
	es, err := b.Read(ctx, s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(batch)+2 || string(es[len(batch)].Data) != "b's" {
		t.Fatalf("the session holds %d entries, want a's first batch and b's", len(es))
	}
}

// BenchmarkFencedAppend is what the fence costs an append: batches of 10
// entries of 200 bytes to one session, unfenced and fenced, on an
// embedded server and on a three-node cluster (replicas 3), as
// entries/s.
func BenchmarkFencedAppend(b *testing.B) {
	for _, where := range []string{"embedded", "cluster"} {
		for _, fenced := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/fenced=%v", where, fenced), func(b *testing.B) {
				ctx := context.Background()
				cfg := journal.Config{Dir: b.TempDir()}
				if where == "cluster" {
					nc := clustertest.Start(b, 3)
					cfg = journal.Config{URL: nc.URL(0), User: clustertest.User, Password: clustertest.Password, Replicas: 3}
				}
				j, err := journal.Open(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer j.Close(ctx)
				const s = "ahp-session:/bench"
				if fenced {
					if _, err := j.Claim(ctx, s, "a"); err != nil {
						b.Fatal(err)
					}
				}
				batch := make([][]byte, 10)
				for i := range batch {
					batch[i] = bytes.Repeat([]byte("e"), 200)
				}
				start := time.Now()
				for b.Loop() {
					if _, err := j.Append(ctx, s, batch...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "entries/s")
			})
		}
	}
}
