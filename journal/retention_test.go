package journal

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// waitFor polls cond until it holds, failing the test after testwait.Hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testwait.Hang)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestMaxAgeDropsOldEntries(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{MaxAge: 200 * time.Millisecond})
		old := appendOK(t, j, s1, "short-lived", "too")
		waitFor(t, "entries past MaxAge to go", func() bool {
			return len(readOK(t, j, []string{s1}, 0, 0)) == 0
		})
		if seq, _ := j.LastSeq(context.Background()); seq < old[1] {
			t.Fatalf("LastSeq went back to %d after expiry of %d", seq, old[1])
		}
		if from := keptFrom(t, j, s1); from <= old[1] {
			t.Fatalf("KeptFrom = %d after entries through %d expired", from, old[1])
		}
		// Nor across a restart with nothing left in the stream.
		j = h.restart(j, Config{MaxAge: 200 * time.Millisecond})
		if seq, _ := j.LastSeq(context.Background()); seq < old[1] {
			t.Fatalf("LastSeq went back to %d after expiry and restart, had %d", seq, old[1])
		}
		if again := appendOK(t, j, s1, "later"); again[0] <= old[1] {
			t.Fatalf("sequence went back after expiry: %d", again[0])
		}
	})
}

// sumData is the data bytes of a session's entries, read whole.
func sumData(t *testing.T, j *Journal, session string) ([]Entry, int) {
	t.Helper()
	entries := readOK(t, j, []string{session}, 0, MaxReadLimit)
	n := 0
	for _, e := range entries {
		n += len(e.Data)
	}
	return entries, n
}

// appendEntries appends count entries of size bytes in batches of ten,
// numbered so the tail can be recognised; it returns their sequences.
func appendEntries(t *testing.T, j *Journal, session string, count, size int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := 0; i < count; i += 10 {
		var batch [][]byte
		for k := i; k < min(i+10, count); k++ {
			batch = append(batch, fmt.Appendf(nil, "%06d%s", k, bytes.Repeat([]byte("."), size-6)))
		}
		s, err := j.Append(context.Background(), session, batch...)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s...)
	}
	return seqs
}

func TestByteBudgetKeepsTheTail(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		const budget, size = 10000, 500
		j := h.open(Config{MaxBytesPerSession: budget})
		appendEntries(t, j, s2, 4, size) // another session, within budget
		seqs := appendEntries(t, j, s1, 100, size)
		j.bg.Wait() // no append runs now: the trims started are all there are

		entries, n := sumData(t, j, s1)
		if n > budget || n == 0 {
			t.Fatalf("session holds %d bytes, budget %d", n, budget)
		}
		tail := seqs[len(seqs)-len(entries):]
		for i, e := range entries {
			if e.Seq != tail[i] {
				t.Fatalf("kept entries are not the newest: entry %d has seq %d, want %d", i, e.Seq, tail[i])
			}
		}
		// Readers learn that what came before the kept tail is gone.
		dropped := seqs[len(seqs)-len(entries)-1]
		if from := keptFrom(t, j, s1); from != dropped+1 {
			t.Fatalf("KeptFrom = %d, want %d (the last dropped entry + 1)", from, dropped+1)
		}
		if from := keptFrom(t, j, s2); from > 1 {
			t.Fatalf("KeptFrom of an untrimmed session = %d, want 1", from)
		}
		if _, n2 := sumData(t, j, s2); n2 != 4*size {
			t.Fatalf("the other session holds %d bytes, want %d", n2, 4*size)
		}
	})
}

// A session already over budget when the journal opens is trimmed on its
// first append.
func TestByteBudgetAfterRestart(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		const budget = 10000
		j := h.open(Config{})
		appendEntries(t, j, s1, 60, 500)
		j = h.restart(j, Config{MaxBytesPerSession: budget})
		last := appendEntries(t, j, s1, 1, 500)
		j.bg.Wait()
		entries, n := sumData(t, j, s1)
		if n > budget || entries[len(entries)-1].Seq != last[0] {
			t.Fatalf("after restart the session holds %d bytes (budget %d), newest seq %d (want %d)",
				n, budget, entries[len(entries)-1].Seq, last[0])
		}
		from := keptFrom(t, j, s1)
		if from <= 1 || from > entries[0].Seq {
			t.Fatalf("KeptFrom = %d with the oldest kept entry at %d", from, entries[0].Seq)
		}
		j = h.restart(j, Config{MaxBytesPerSession: budget})
		if again := keptFrom(t, j, s1); again != from {
			t.Fatalf("KeptFrom after a restart = %d, was %d", again, from)
		}
	})
}

func keptFrom(t *testing.T, j *Journal, session string) uint64 {
	t.Helper()
	from, err := j.KeptFrom(context.Background(), session)
	if err != nil {
		t.Fatalf("KeptFrom: %v", err)
	}
	return from
}
