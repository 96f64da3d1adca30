package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// appendCounted appends n entries numbered from 0 ("00000000", ...) to
// session in batches of batch, and returns their sequences.
func appendCounted(t testing.TB, j *Journal, session string, n, batch int) []uint64 {
	t.Helper()
	seqs := make([]uint64, 0, n)
	for i := 0; i < n; i += batch {
		data := make([][]byte, min(batch, n-i))
		for k := range data {
			data[k] = fmt.Appendf(nil, "%08d", i+k)
		}
		s, err := j.Append(context.Background(), session, data...)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		seqs = append(seqs, s...)
	}
	return seqs
}

// readPaged reads the session whole in pages of limit, as the host does:
// a page shorter than limit is the end.
func readPaged(t testing.TB, j *Journal, session string, limit int) []Entry {
	t.Helper()
	var out []Entry
	for after := uint64(0); ; {
		page, err := j.Read(context.Background(), session, after, limit)
		if err != nil {
			t.Fatalf("Read after %d: %v", after, err)
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

// checkCounted fails unless got is every entry appendCounted appended,
// with the sequences it was given, in order.
func checkCounted(t testing.TB, got []Entry, seqs []uint64) {
	t.Helper()
	if len(got) != len(seqs) {
		t.Fatalf("read %d entries, %d were appended", len(got), len(seqs))
	}
	for i, e := range got {
		if want := fmt.Sprintf("%08d", i); string(e.Data) != want || e.Seq != seqs[i] {
			t.Fatalf("entry %d is %q at %d, want %q at %d", i, e.Data, e.Seq, want, seqs[i])
		}
	}
}

// Fetches that come back empty while more is pending, as a lagging
// consumer's do, neither end a read early nor lose an entry: every page
// is full up to the session's end, and the whole session comes back.
func TestReadThroughEmptyFetches(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		const n = 20000
		seqs := appendCounted(t, j, s1, n, MaxBatch)
		appendCounted(t, j, s2, 100, 10)
		var fetches atomic.Int64
		// Every other fetch, and three in a row now and then, come back
		// empty.
		j.fetchFault = func() bool {
			k := fetches.Add(1)
			return k%2 == 0 || k%17 < 3
		}
		checkCounted(t, readPaged(t, j, s1, MaxReadLimit), seqs)
		checkCounted(t, readPaged(t, j, s1, 777), seqs)
		if fetches.Load() == 0 {
			t.Fatal("the fault was never asked: the test proves nothing")
		}
	})
}

// A fetch the read gives up on while the server still delivers to it (its
// answer slower than the read waits, on a loaded machine) loses nothing:
// what the server went on delivering was taken from the consumer, so the
// read goes on from a new one. Under a CPU hog such a fetch once left a
// read 553 entries short, and another failing with ErrReadIncomplete.
func TestReadThroughAbandonedFetches(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		const n = 1000
		seqs := appendCounted(t, j, s1, n, MaxBatch)
		var cuts atomic.Int64
		// Every fetch is given up on after its tenth message; the
		// server has more of the batch to deliver to it.
		j.fetchCut = func(got int) bool {
			if got == 10 {
				cuts.Add(1)
				return true
			}
			return false
		}
		checkCounted(t, readPaged(t, j, s1, MaxReadLimit), seqs)
		if cuts.Load() == 0 {
			t.Fatal("no fetch was cut: the test proves nothing")
		}
	})
}

// A consumer that never delivers what the server says it holds ends the
// read with an error, not a page taken for the end.
func TestReadThatCannotFinishFails(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	appendCounted(t, j, s1, 50, 50)
	j.fetchFault = func() bool { return true }
	page, err := j.Read(context.Background(), s1, 0, 0)
	if !errors.Is(err, ErrReadIncomplete) {
		t.Fatalf("Read with every fetch empty: %d entries, %v; want ErrReadIncomplete", len(page), err)
	}
}

// Entries that go while a read runs (a delete here; retention alike) end
// it with what it read, neither hanging nor failing.
func TestReadWhileEntriesGo(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		seqs := appendCounted(t, j, s1, 5000, MaxBatch)
		var fetches atomic.Int64
		j.fetchFault = func() bool {
			if fetches.Add(1) == 3 {
				if err := j.Delete(context.Background(), s1); err != nil {
					t.Errorf("Delete: %v", err)
				}
			}
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		page, err := j.Read(ctx, s1, 0, MaxReadLimit)
		if err != nil {
			t.Fatalf("Read while the session was deleted: %v", err)
		}
		// What came before the delete came whole and in order.
		checkCounted(t, page, seqs[:len(page)])
		if len(page) == len(seqs) {
			t.Fatal("the read took every entry before the delete: nothing raced it")
		}
	})
}

// A session of 20,000 entries read back while 6 other sessions append as
// fast as they can and goroutines burn both cores: every entry, in order,
// no gap, page after page.
func TestReadUnderLoad(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		const n = 20000
		seqs := appendCounted(t, j, s1, n, 500)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 6 {
			wg.Go(func() {
				session := fmt.Sprintf("load/%d", w)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := j.Append(context.Background(), session, deltas(i, 20)...); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				x := 1
				for {
					select {
					case <-stop:
						return
					default:
					}
					for k := range 100000 {
						x = x*31 + k
					}
					_ = x
				}
			})
		}
		for range 2 {
			checkCounted(t, readPaged(t, j, s1, MaxReadLimit), seqs)
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}
