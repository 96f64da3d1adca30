package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// noise is n bytes that do not repeat, drawn from seed, so that an entry
// put back together wrong shows.
func noise(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	_, _ = r.Read(b)
	return b
}

// smallChunks makes j write any entry over 1,200 bytes as chunks of
// 1,000, so that tests cross many chunk boundaries with small entries.
// It must be called before j is used.
func smallChunks(j *Journal) {
	j.maxMsg, j.chunkData = 1200, 1000
}

// sameData fails unless got holds exactly want's data, with seqs.
func sameData(t *testing.T, what string, got []Entry, want [][]byte, seqs []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i, e := range got {
		if !bytes.Equal(e.Data, want[i]) || e.Seq != seqs[i] {
			t.Fatalf("%s: entry %d is %d bytes at %d, want %d bytes at %d (same bytes: %v)",
				what, i, len(e.Data), e.Seq, len(want[i]), seqs[i], bytes.Equal(e.Data, want[i]))
		}
	}
}

// Entries of 2 MB and 33 MB, more than the server's 1 MiB payload, among
// small ones and another session's: each comes back whole through Read,
// ReadSessions, Follow and Newest, under the sequence Append gave it, and
// counts as one entry.
func TestChunkedRoundTrip(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		f := followOK(t, j, s1, 0)
		entries := [][]byte{[]byte("small"), noise(1, 2<<20), []byte("between"), noise(2, 33<<20), []byte("last")}
		var seqs []uint64
		for i, e := range entries {
			seqs = append(seqs, appendOK(t, j, s1, string(e))...)
			appendOK(t, j, s2, fmt.Sprintf("other %d", i))
		}
		sameData(t, "Read", readOK(t, j, []string{s1}, 0, 0), entries, seqs)
		sameData(t, "Follow", receive(t, f, len(entries)), entries, seqs)
		both := readOK(t, j, []string{s1, s2}, 0, 0)
		if len(both) != 2*len(entries) {
			t.Fatalf("ReadSessions: %d entries, want %d", len(both), 2*len(entries))
		}
		for i, e := range both {
			if i > 0 && e.Seq <= both[i-1].Seq {
				t.Fatalf("ReadSessions: entry %d at %d after %d", i, e.Seq, both[i-1].Seq)
			}
		}
		if n, err := j.Counts(ctx, []string{s1}); err != nil || n[s1] != uint64(len(entries)) {
			t.Fatalf("Counts = %v, %v; want %d", n, err, len(entries))
		}
		// The newest entry is a chunked one, on its own.
		big := noise(3, 3<<20)
		seq := appendOK(t, j, s1, string(big))[0]
		if e, ok, err := j.Newest(ctx); err != nil || !ok || e.Seq != seq || !bytes.Equal(e.Data, big) {
			t.Fatalf("Newest: %d bytes at %d, %v, %v; want %d bytes at %d", len(e.Data), e.Seq, ok, err, len(big), seq)
		}
		if last, err := j.SessionLastSeq(ctx, s1); err != nil || last != seq {
			t.Fatalf("SessionLastSeq = %d, %v; want %d", last, err, seq)
		}
		if got := receive(t, f, 1); !bytes.Equal(got[0].Data, big) {
			t.Fatal("the follower got the newest chunked entry wrong")
		}
	})
}

// chunkedSession appends n entries of 0 to 5,000 bytes (with small
// chunks, up to 5 of them) to session, some in batches, and returns them
// and their sequences.
func chunkedSession(t *testing.T, j *Journal, session string, seed uint64, n int) ([][]byte, []uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	var entries [][]byte
	var seqs []uint64
	for len(entries) < n {
		batch := make([][]byte, min(1+r.IntN(3), n-len(entries)))
		for k := range batch {
			batch[k] = noise(seed<<20+uint64(len(entries)+k), r.IntN(5001))
		}
		s, err := j.Append(context.Background(), session, batch...)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		entries, seqs = append(entries, batch...), append(seqs, s...)
	}
	return entries, seqs
}

// Two sessions appending chunked entries at once, so that their chunks
// interleave in the stream: paged with small limits, from every sequence
// (inside entries too), alone and together, each entry comes back once,
// whole, in order; a follower started anywhere gets the entries after.
func TestChunkedPaging(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		j := h.open(Config{})
		smallChunks(j)
		var wg sync.WaitGroup
		var e1, e2 [][]byte
		var q1, q2 []uint64
		wg.Go(func() { e1, q1 = chunkedSession(t, j, s1, 1, 60) })
		wg.Go(func() { e2, q2 = chunkedSession(t, j, s2, 2, 60) })
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, limit := range []int{1, 2, 3, 7, 1000} {
			sameData(t, fmt.Sprintf("pages of %d", limit), readPaged(t, j, s1, limit), e1, q1)
		}
		// Every starting point, on an entry's last chunk or inside one:
		// the entries with a greater sequence, whole.
		first, last := min(q1[0], q2[0]), max(q1[len(q1)-1], q2[len(q2)-1])
		for after := first - 1; after <= last; after++ {
			k := 0
			for k < len(q1) && q1[k] <= after {
				k++
			}
			n := min(3, len(q1)-k)
			sameData(t, fmt.Sprintf("3 after %d", after), readOK(t, j, []string{s1}, after, 3), e1[k:k+n], q1[k:k+n])
		}
		// Both sessions, merged by sequence, in pages of 4.
		type want struct {
			data []byte
			seq  uint64
		}
		var all []want
		for i, k := 0, 0; i < len(q1) || k < len(q2); {
			if k == len(q2) || (i < len(q1) && q1[i] < q2[k]) {
				all = append(all, want{e1[i], q1[i]})
				i++
			} else {
				all = append(all, want{e2[k], q2[k]})
				k++
			}
		}
		var got []Entry
		for after := uint64(0); ; {
			page := readOK(t, j, []string{s1, s2}, after, 4)
			got = append(got, page...)
			if len(page) < 4 {
				break
			}
			after = page[len(page)-1].Seq
		}
		if len(got) != len(all) {
			t.Fatalf("ReadSessions in pages of 4: %d entries, want %d", len(got), len(all))
		}
		for i, e := range got {
			if e.Seq != all[i].seq || !bytes.Equal(e.Data, all[i].data) {
				t.Fatalf("ReadSessions entry %d: %d bytes at %d, want %d bytes at %d", i, len(e.Data), e.Seq, len(all[i].data), all[i].seq)
			}
		}
		// Followers from a chunked entry's first chunk (inside it), from
		// its last, and from before the first entry.
		for i, e := range e1 {
			if len(e) <= j.maxMsg || i+3 >= len(e1) {
				continue
			}
			for _, after := range []uint64{q1[i] - 1, q1[i], q1[max(i-1, 0)]} {
				f := followOK(t, j, s1, after)
				k := 0
				for q1[k] <= after {
					k++
				}
				sameData(t, fmt.Sprintf("follow after %d", after), receive(t, f, 3), e1[k:k+3], q1[k:k+3])
				f.Close()
			}
			break
		}
		f := followOK(t, j, s1, 0)
		sameData(t, "follow from 0", receive(t, f, len(e1)), e1, q1)
	})
}

// publishRaw writes one message as the journal would, for tests that
// leave what a writer that died would leave.
func publishRaw(t *testing.T, j *Journal, subject string, h nats.Header, data []byte) uint64 {
	t.Helper()
	ack, err := j.js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Header: h, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// Chunks no entry ends (a writer that died midway), a last chunk whose
// first chunks are not there, and two runs interleaved are not entries:
// Read, Follow and Counts skip them and return every whole entry around
// them.
func TestChunkedOrphansSkipped(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		smallChunks(j)
		var want [][]byte
		var seqs []uint64
		keep := func(e []byte) {
			want, seqs = append(want, e), append(seqs, appendOK(t, j, s1, string(e))...)
		}
		part, main := j.partSubject(s1), j.subject(s1)
		keep([]byte("before"))
		// A run cut short after two of its three chunks, then whole
		// entries of three chunks, one small.
		publishRaw(t, j, part, chunkHeader(0, 3, "dead", 3000, 0), noise(9, 1000))
		publishRaw(t, j, part, chunkHeader(1, 3, "dead", 3000, 0), noise(9, 1000))
		keep(noise(10, 3000))
		keep([]byte("small"))
		// A last chunk whose first chunks are not there (its first names a
		// sequence that is no chunk of it).
		publishRaw(t, j, main, chunkHeader(2, 3, "lost", 3000, seqs[len(seqs)-1]), noise(11, 1000))
		keep(noise(12, 2500))
		// Two runs interleaved, as two writers without the session's
		// order would leave them: the one cut into is no entry.
		a0 := publishRaw(t, j, part, chunkHeader(0, 2, "a", 2000, 0), noise(13, 1000))
		publishRaw(t, j, part, chunkHeader(0, 2, "b", 2000, 0), noise(14, 1000))
		publishRaw(t, j, main, chunkHeader(1, 2, "a", 2000, a0), noise(15, 1000))
		keep(noise(16, 1500))
		// A chunk of another run where a run's second chunk should be.
		c0 := publishRaw(t, j, part, chunkHeader(0, 3, "c", 3000, 0), noise(18, 1000))
		publishRaw(t, j, part, chunkHeader(1, 3, "stray", 3000, 0), noise(19, 1000))
		publishRaw(t, j, main, chunkHeader(2, 3, "c", 3000, c0), noise(20, 1000))
		keep([]byte("after the stray"))
		// A run cut short at the end.
		publishRaw(t, j, part, chunkHeader(0, 4, "tail", 4000, 0), noise(17, 1000))

		sameData(t, "Read", readOK(t, j, []string{s1}, 0, 0), want, seqs)
		sameData(t, "Read in pages of 1", readPaged(t, j, s1, 1), want, seqs)
		f := followOK(t, j, s1, 0)
		sameData(t, "Follow", receive(t, f, len(want)), want, seqs)
		if e, ok, err := j.Newest(ctx); err != nil || !ok || e.Seq != seqs[len(seqs)-1] {
			t.Fatalf("Newest = %d, %v, %v; want %d", e.Seq, ok, err, seqs[len(seqs)-1])
		}
		// The lost last chunk is counted: Counts reads the server's count
		// of the session's subject, without looking at the messages.
		if n, err := j.Counts(ctx, []string{s1}); err != nil || n[s1] != uint64(len(want)+3) {
			t.Fatalf("Counts = %v, %v; want %d (%d entries and 3 last chunks of runs cut into)", n, err, len(want)+3, len(want))
		}
	})
}

// An entry whose first chunks the age limit took (the stream's oldest
// messages go first) is not returned, and KeptFrom is past it.
func TestChunkedEntryCutByAge(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	smallChunks(j)
	ctx := context.Background()
	cut := appendOK(t, j, s1, string(noise(1, 3000)))[0]
	kept := appendOK(t, j, s1, string(noise(2, 3000)), "small")
	// What the age limit does: the stream's first message goes.
	if err := j.stream.DeleteMsg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := readOK(t, j, []string{s1}, 0, 0)
	if len(got) != 2 || got[0].Seq != kept[0] || got[1].Seq != kept[1] {
		t.Fatalf("read %d entries (first at %d), want the 2 at %v", len(got), got[0].Seq, kept)
	}
	if from := keptFrom(t, j, s1); from <= cut || from > kept[0] {
		t.Fatalf("KeptFrom = %d; the entry at %d lost its first chunk, the next is at %d", from, cut, kept[0])
	}
}

// A budget trim of chunked entries drops whole entries, the oldest
// first, chunks and all, and leaves the rest whole.
func TestChunkedRetention(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const budget = 20000
		j := h.open(Config{MaxBytesPerSession: budget})
		smallChunks(j)
		entries, seqs := chunkedSession(t, j, s1, 3, 40)
		j.bg.Wait()
		got := readOK(t, j, []string{s1}, 0, 0)
		k := len(entries) - len(got)
		if k == 0 {
			t.Fatal("nothing was trimmed")
		}
		sameData(t, "after the trim", got, entries[k:], seqs[k:])
		size := 0
		chunks := 0 // the kept entries' chunks but their last
		for _, e := range got {
			size += len(e.Data)
			if len(e.Data) > j.maxMsg {
				chunks += (len(e.Data)+j.chunkData-1)/j.chunkData - 1
			}
		}
		if size > budget {
			t.Fatalf("the session holds %d bytes, budget %d", size, budget)
		}
		if n := subjectCount(t, j, j.partSubject(s1)); n != uint64(chunks) {
			t.Fatalf("%d chunks left on the part subject, the kept entries have %d", n, chunks)
		}
		// Past the last entry dropped, and no further than the first kept
		// (a floor record purged can leave a hole between them).
		if from := keptFrom(t, j, s1); from <= seqs[k-1] || from > seqs[k] {
			t.Fatalf("KeptFrom = %d; the last entry dropped is at %d, the first kept at %d", from, seqs[k-1], seqs[k])
		}
		if err := j.Delete(ctx, s1); err != nil {
			t.Fatal(err)
		}
		if n := subjectCount(t, j, j.partSubject(s1)); n != 0 {
			t.Fatalf("%d chunks left after Delete", n)
		}
		if got := readOK(t, j, []string{s1}, 0, 0); len(got) != 0 {
			t.Fatalf("%d entries after Delete", len(got))
		}
	})
}

// subjectCount is how many messages the stream holds on subject.
func subjectCount(t *testing.T, j *Journal, subject string) uint64 {
	t.Helper()
	info, err := j.stream.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// A journal reads entries up to its own bound: a larger one written by a
// journal with a larger bound is an error, not an entry skipped.
func TestChunkedEntryOverTheReadersBound(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	smallChunks(j)
	appendOK(t, j, s1, "small", string(noise(1, 5000)))
	j.maxEntry = 4000
	if _, err := j.Read(context.Background(), s1, 0, 0); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("reading an entry over the bound: %v", err)
	}
}
