package journal

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// Session names shaped like channel URIs, with characters a NATS subject
// does not allow ('.', '*', '>', spaces).
const (
	s1 = "ahp-session://claude/7f04.8f32 *>"
	s2 = "ahp-session://script/a.b.c"
)

func appendOK(t *testing.T, j *Journal, session string, entries ...string) []uint64 {
	t.Helper()
	data := make([][]byte, len(entries))
	for i, e := range entries {
		data[i] = []byte(e)
	}
	seqs, err := j.Append(context.Background(), session, data...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(seqs) != len(entries) {
		t.Fatalf("Append returned %d sequences for %d entries", len(seqs), len(entries))
	}
	return seqs
}

func readOK(t *testing.T, j *Journal, sessions []string, after uint64, limit int) []Entry {
	t.Helper()
	entries, err := j.ReadSessions(context.Background(), sessions, after, limit)
	if err != nil {
		t.Fatalf("ReadSessions: %v", err)
	}
	return entries
}

// datas is the entries' data as strings.
func datas(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = string(e.Data)
	}
	return out
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestRoundTrip(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		a := appendOK(t, j, s1, "one", "two", "three")
		b := appendOK(t, j, s2, "alpha", "beta")
		appendOK(t, j, s1, "four")

		got := readOK(t, j, []string{s1}, 0, 0)
		if want := []string{"one", "two", "three", "four"}; !equal(datas(got), want) {
			t.Fatalf("read %v, want %v", datas(got), want)
		}
		for i, e := range got {
			if e.Session != s1 || e.Time.IsZero() || (i > 0 && e.Seq <= got[i-1].Seq) {
				t.Fatalf("entry %d = %+v", i, e)
			}
		}
		if got[0].Seq != a[0] || got[2].Seq != a[2] {
			t.Fatalf("read sequences %d,%d; appended %v", got[0].Seq, got[2].Seq, a)
		}
		if page := readOK(t, j, []string{s1}, a[0], 2); !equal(datas(page), []string{"two", "three"}) {
			t.Fatalf("page after %d = %v", a[0], datas(page))
		}
		all := readOK(t, j, []string{s2, s1, s2}, 0, 0)
		if want := []string{"one", "two", "three", "alpha", "beta", "four"}; !equal(datas(all), want) {
			t.Fatalf("read across sessions %v, want %v", datas(all), want)
		}
		if after := readOK(t, j, []string{s1, s2}, b[1], 0); !equal(datas(after), []string{"four"}) {
			t.Fatalf("read across sessions after %d = %v", b[1], datas(after))
		}
		if e := readOK(t, j, []string{"ahp-session://none"}, 0, 0); len(e) != 0 {
			t.Fatalf("unknown session read %d entries", len(e))
		}

		if from := keptFrom(t, j, s1); from > a[0] {
			t.Fatalf("KeptFrom = %d with nothing dropped; the first entry is %d", from, a[0])
		}
		last, err := j.LastSeq(ctx)
		if err != nil || last != got[3].Seq {
			t.Fatalf("LastSeq = %d, %v; want %d", last, err, got[3].Seq)
		}
		for session, want := range map[string]uint64{s1: got[3].Seq, s2: b[1], "ahp-session://none": 0} {
			if seq, err := j.SessionLastSeq(ctx, session); err != nil || seq != want {
				t.Errorf("SessionLastSeq(%q) = %d, %v; want %d", session, seq, err, want)
			}
		}
	})
}

// Many sessions appending at once, two goroutines per session: each
// session reads back every entry once, each batch contiguous and in order,
// and no sequence is handed out twice.
func TestConcurrentAppendsKeepOrder(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		const sessions, writers, batches, batchLen = 20, 2, 25, 4
		var wg sync.WaitGroup
		errs := make(chan error, sessions*writers)
		for s := range sessions {
			for w := range writers {
				wg.Go(func() {
					for b := range batches {
						batch := make([][]byte, batchLen)
						for i := range batch {
							batch[i] = fmt.Appendf(nil, "w%d b%02d i%d", w, b, i)
						}
						if _, err := j.Append(context.Background(), fmt.Sprintf("s/%d", s), batch...); err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		for s := range sessions {
			var got []Entry
			for after := uint64(0); ; {
				page := readOK(t, j, []string{fmt.Sprintf("s/%d", s)}, after, 30)
				got = append(got, page...)
				if len(page) < 30 {
					break
				}
				after = page[len(page)-1].Seq
			}
			if len(got) != writers*batches*batchLen {
				t.Fatalf("session %d: %d entries, want %d", s, len(got), writers*batches*batchLen)
			}
			next := make([]int, writers) // the next batch expected of each writer
			for i := 0; i < len(got); i += batchLen {
				var w, b int
				fmt.Sscanf(string(got[i].Data), "w%d b%d", &w, &b)
				if b != next[w] {
					t.Fatalf("session %d: writer %d batch %d came before batch %d", s, w, b, next[w])
				}
				next[w]++
				for k := range batchLen {
					e := got[i+k]
					if want := fmt.Sprintf("w%d b%02d i%d", w, b, k); string(e.Data) != want {
						t.Fatalf("session %d entry %d = %q, want %q (batch interleaved)", s, i+k, e.Data, want)
					}
					if seen[e.Seq] || (i+k > 0 && e.Seq <= got[i+k-1].Seq) {
						t.Fatalf("session %d: sequence %d repeated or out of order", s, e.Seq)
					}
					seen[e.Seq] = true
				}
			}
		}
	})
}

func TestRestartContinuesSequence(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		first := appendOK(t, j, s1, "before", "restart")
		appendOK(t, j, s2, "other")
		last, _ := j.LastSeq(ctx)

		j = h.restart(j, Config{})
		if got := readOK(t, j, []string{s1}, 0, 0); !equal(datas(got), []string{"before", "restart"}) || got[0].Seq != first[0] {
			t.Fatalf("after restart read %v", got)
		}
		if seq, err := j.LastSeq(ctx); err != nil || seq != last {
			t.Fatalf("LastSeq after restart = %d, %v; want %d", seq, err, last)
		}
		next := appendOK(t, j, s1, "after")
		if next[0] <= last {
			t.Fatalf("sequence went back: %d after %d", next[0], last)
		}

		// With every entry deleted, the sequence still does not go back.
		for _, s := range []string{s1, s2} {
			if err := j.Delete(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		j = h.restart(j, Config{})
		if seq, err := j.LastSeq(ctx); err != nil || seq != next[0] {
			t.Fatalf("LastSeq after deleting all and restarting = %d, %v; want %d", seq, err, next[0])
		}
		if again := appendOK(t, j, s2, "fresh"); again[0] <= next[0] {
			t.Fatalf("sequence went back: %d after %d", again[0], next[0])
		}
	})
}

func TestDelete(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		old := appendOK(t, j, s1, "gone", "gone too")
		appendOK(t, j, s2, "stays")
		if err := j.Delete(ctx, s1); err != nil {
			t.Fatal(err)
		}
		if got := readOK(t, j, []string{s1, s2}, 0, 0); !equal(datas(got), []string{"stays"}) {
			t.Fatalf("after Delete read %v", datas(got))
		}
		if seq, _ := j.SessionLastSeq(ctx, s1); seq != 0 {
			t.Fatalf("deleted session's last sequence = %d", seq)
		}
		if again := appendOK(t, j, s1, "new"); again[0] <= old[1] {
			t.Fatalf("a deleted session's sequence was reused: %d", again[0])
		}
		if err := j.Delete(ctx, "ahp-session://never"); err != nil {
			t.Fatalf("Delete of an unknown session: %v", err)
		}
	})
}

func TestLargeEntryRoundTrip(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	big := bytes.Repeat([]byte("x"), j.maxEntry)
	if _, err := j.Append(context.Background(), s1, big); err != nil {
		t.Fatalf("appending an entry of the maximum size %d: %v", len(big), err)
	}
	if got := readOK(t, j, []string{s1}, 0, 0); len(got) != 1 || !bytes.Equal(got[0].Data, big) {
		t.Fatal("the largest entry did not come back whole")
	}
}

// Closing while sessions append ends every Append, with its sequences or
// an error, and leaves nothing running.
func TestCloseDuringAppends(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		started := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for s := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					if _, err := j.Append(context.Background(), fmt.Sprintf("s/%d", s), []byte("x"), []byte("y")); err != nil {
						return
					}
					if i == 0 {
						started <- struct{}{}
					}
				}
			})
		}
		for range 8 {
			<-started
		}
		closeJournal(t, j)
		wg.Wait()
	})
}

// Full batches from many sessions at once, more entries than the
// publisher lets await acks, all land.
func TestFullBatchesAtOnce(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	const sessions = 20 // 20 * MaxBatch is more than may be pending at once
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			batch := make([][]byte, MaxBatch)
			for i := range batch {
				batch[i] = []byte{byte(i)}
			}
			if _, err := j.Append(context.Background(), fmt.Sprintf("full/%d", s), batch...); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := readOK(t, j, []string{"full/3"}, 0, MaxReadLimit); len(got) != MaxBatch {
		t.Fatalf("read %d entries, want %d", len(got), MaxBatch)
	}
}

// TestNewest: the newest entry of any session, none in an empty journal,

func TestNewest(t *testing.T) {
	modes(t, testNewest)
}

func testNewest(t *testing.T, h *harness) {
	j := h.open(Config{})
	ctx := context.Background()
	if _, ok, err := j.Newest(ctx); ok || err != nil {
		t.Fatalf("empty journal: %v %v", ok, err)
	}
	if _, err := j.Append(ctx, "ahp-session:/a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	seqs, err := j.Append(ctx, "ahp-session:/b", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := j.Newest(ctx)
	if err != nil || !ok || e.Session != "ahp-session:/b" || e.Seq != seqs[0] || string(e.Data) != "two" {
		t.Fatalf("newest: %+v %v %v", e, ok, err)
	}
}
