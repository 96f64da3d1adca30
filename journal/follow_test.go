package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/internal/testwait"
)

// waitLimit bounds how long a test waits for an event before it fails
// (a guard against hanging, not a pause).
const waitLimit = testwait.Hang

func followOK(t *testing.T, j *Journal, session string, after uint64) *Follower {
	t.Helper()
	f, err := j.Follow(context.Background(), session, after)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

// receive takes n entries from f, failing if it ends first.
func receive(t *testing.T, f *Follower, n int) []Entry {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	out := make([]Entry, 0, n)
	for len(out) < n {
		select {
		case e, ok := <-f.Entries():
			if !ok {
				t.Fatalf("follower ended after %d of %d entries: %v", len(out), n, f.Err())
			}
			out = append(out, e)
		case <-limit.C:
			t.Fatalf("received %d of %d entries in %v", len(out), n, waitLimit)
		}
	}
	return out
}

// receiveThrough takes entries from f until one with sequence last.
func receiveThrough(t *testing.T, f *Follower, last uint64) []Entry {
	t.Helper()
	var out []Entry
	for len(out) == 0 || out[len(out)-1].Seq < last {
		out = append(out, receive(t, f, 1)...)
	}
	return out
}

// rest closes f and returns what it still held: nothing, when it
// delivered each entry once.
func rest(t *testing.T, f *Follower) []Entry {
	t.Helper()
	f.Close()
	var out []Entry
	for e := range f.Entries() {
		out = append(out, e)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	return out
}

// sameEntries fails unless got is want, entry by entry.
func sameEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("followed %d entries, the journal holds %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Session != w.Session || g.Seq != w.Seq || !g.Time.Equal(w.Time) || string(g.Data) != string(w.Data) {
			t.Fatalf("entry %d followed as %+v, read as %+v", i, g, w)
		}
	}
}

// appendNumbered appends n entries "e0000".. to session, in batches of
// 1 to 20, with entries of other subjects in between.
func appendNumbered(ctx context.Context, j *Journal, session string, from, n int) ([]uint64, error) {
	var seqs []uint64
	for i := from; i < from+n; {
		batch := min(1+i%20, from+n-i)
		data := make([][]byte, batch)
		for k := range data {
			data[k] = fmt.Appendf(nil, "e%04d", i+k)
		}
		s, err := j.Append(ctx, session, data...)
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, s...)
		i += batch
		if _, err := j.Append(ctx, s2, []byte("other")); err != nil {
			return seqs, err
		}
		if i%100 < batch {
			if err := j.SetMark(ctx, session, []byte("mark")); err != nil {
				return seqs, err
			}
		}
	}
	return seqs, nil
}

func TestFollowFromStart(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		// Started before the session has an entry.
		f := followOK(t, j, s1, 0)
		const n = 1000
		appended := make(chan error, 1)
		go func() {
			_, err := appendNumbered(ctx, j, s1, 0, n)
			appended <- err
		}()
		got := receive(t, f, n)
		if err := <-appended; err != nil {
			t.Fatal(err)
		}
		for i, e := range got {
			if want := fmt.Sprintf("e%04d", i); string(e.Data) != want || e.Session != s1 {
				t.Fatalf("entry %d = %q of %q, want %q of %q", i, e.Data, e.Session, want, s1)
			}
		}
		sameEntries(t, got, readOK(t, j, []string{s1}, 0, MaxReadLimit))
		if extra := rest(t, f); len(extra) != 0 {
			t.Fatalf("%d entries after the last appended (first %+v)", len(extra), extra[0])
		}
	})
}

func TestFollowFromTheMiddle(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		// Appends go on while the reader reads the start and follows from
		// where it read to.
		const n = 2000
		started := make(chan struct{})
		appended := make(chan []uint64, 1)
		failed := make(chan error, 1)
		go func() {
			var seqs []uint64
			for i := range n {
				s, err := j.Append(ctx, s1, fmt.Appendf(nil, "e%04d", i))
				if err != nil {
					failed <- err
					return
				}
				seqs = append(seqs, s...)
				if i == 200 {
					close(started)
				}
			}
			appended <- seqs
		}()
		select {
		case <-started:
		case err := <-failed:
			t.Fatal(err)
		}
		page := readOK(t, j, []string{s1}, 0, 0)
		after := page[len(page)-1].Seq
		f := followOK(t, j, s1, after)
		var seqs []uint64
		select {
		case seqs = <-appended:
		case err := <-failed:
			t.Fatal(err)
		}
		if after == seqs[len(seqs)-1] {
			t.Fatal("the read took every entry: nothing raced the follower's start")
		}
		got := receiveThrough(t, f, seqs[len(seqs)-1])
		sameEntries(t, got, readOK(t, j, []string{s1}, after, MaxReadLimit))
		if extra := rest(t, f); len(extra) != 0 {
			t.Fatalf("%d entries after the last appended", len(extra))
		}
	})
}

// TestFollowAnotherHost follows on one journal what another, connected
// to the same server as another host would be, appends.
func TestFollowAnotherHost(t *testing.T) {
	h := urlHarness(t)
	ctx := context.Background()
	writer, reader := h.open(Config{}), h.open(Config{})
	f := followOK(t, reader, s1, 0)
	seqs, err := appendNumbered(ctx, writer, s1, 0, 300)
	if err != nil {
		t.Fatal(err)
	}
	got := receiveThrough(t, f, seqs[len(seqs)-1])
	sameEntries(t, got, readOK(t, writer, []string{s1}, 0, MaxReadLimit))
}

// TestFollowAcrossServerRestart restarts the server under a follower,
// which loses its consumer (kept in the server's memory) with it.
func TestFollowAcrossServerRestart(t *testing.T) {
	h := urlHarness(t)
	ctx := context.Background()
	writer, reader := h.open(Config{}), h.open(Config{})
	f := followOK(t, reader, s1, 0)
	before, err := appendNumbered(ctx, writer, s1, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := receiveThrough(t, f, before[len(before)-1])

	back := []chan nats.Status{writer.nc.StatusChanged(nats.CONNECTED), reader.nc.StatusChanged(nats.CONNECTED)}
	h.restartServer()
	for i, ch := range back {
		select {
		case <-ch:
		case <-time.After(waitLimit):
			t.Fatalf("journal %d did not reconnect in %v", i, waitLimit)
		}
	}
	after, err := appendNumbered(ctx, writer, s1, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, receiveThrough(t, f, after[len(after)-1])...)
	sameEntries(t, got, readOK(t, writer, []string{s1}, 0, MaxReadLimit))
	if extra := rest(t, f); len(extra) != 0 {
		t.Fatalf("%d entries after the last appended", len(extra))
	}
}

func urlHarness(t *testing.T) *harness {
	h := &harness{t: t, url: true, dir: t.TempDir()}
	h.startServer()
	t.Cleanup(h.stopServer)
	return h
}

func TestFollowEnds(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		appendOK(t, j, s1, "one")

		t.Run("Close", func(t *testing.T) {
			f := followOK(t, j, s1, 0)
			receive(t, f, 1)
			f.Close()
			f.Close()
			if _, ok := <-f.Entries(); ok {
				t.Fatal("an entry after Close")
			}
			if err := f.Err(); err != nil {
				t.Fatalf("Err = %v, want nil", err)
			}
			consumers(t, j, 0)
		})
		t.Run("context", func(t *testing.T) {
			fctx, cancel := context.WithCancel(ctx)
			f, err := j.Follow(fctx, s1, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			consumers(t, j, 1)
			cancel()
			for range f.Entries() {
			}
			if err := f.Err(); err != nil {
				t.Fatalf("Err = %v, want nil", err)
			}
			f.Close()
			consumers(t, j, 0)
		})
	})
}

func TestFollowEndsWithTheJournal(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		f := followOK(t, j, s1, 0)
		closeJournal(t, j)
		for range f.Entries() {
		}
		if err := f.Err(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Err = %v, want ErrClosed", err)
		}
		if _, err := j.Follow(ctx, s1, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Follow on a closed journal: %v", err)
		}
		// The journal let go of the follower's consumer before it closed.
		consumers(t, h.open(Config{}), 0)
	})
}

// consumers fails unless the stream has n consumers.
func consumers(t *testing.T, j *Journal, n int) {
	t.Helper()
	info, err := j.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != n {
		t.Fatalf("the stream has %d consumers, want %d", info.State.Consumers, n)
	}
}

func TestFollowFellBehind(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		const buffer = 4
		f, err := j.follow(ctx, s1, 0, buffer)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		seqs, err := appendNumbered(ctx, j, s1, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		// The reader has not read: the follower ends by itself.
		select {
		case <-f.done:
		case <-time.After(waitLimit):
			t.Fatalf("a follower whose reader never reads still runs after %v", waitLimit)
		}
		if err := f.Err(); !errors.Is(err, ErrFellBehind) {
			t.Fatalf("Err = %v, want ErrFellBehind", err)
		}
		var got []Entry
		for e := range f.Entries() {
			got = append(got, e)
		}
		all := readOK(t, j, []string{s1}, 0, MaxReadLimit)
		sameEntries(t, got, all[:buffer])

		// As the contract says: read on from the last entry taken, then
		// follow again.
		last := got[len(got)-1].Seq
		got = append(got, readOK(t, j, []string{s1}, last, 0)...)
		f2 := followOK(t, j, s1, got[len(got)-1].Seq)
		more, err := appendNumbered(ctx, j, s1, 50, 3)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, receiveThrough(t, f2, more[len(more)-1])...)
		sameEntries(t, got, readOK(t, j, []string{s1}, 0, MaxReadLimit))
		if got[len(got)-1].Seq != more[len(more)-1] || len(got) != len(seqs)+len(more) {
			t.Fatalf("got %d entries through %d", len(got), got[len(got)-1].Seq)
		}
	})
}

// TestFollowFromDroppedEntries follows from before entries retention
// dropped: it starts at the first one kept.
func TestFollowFromDroppedEntries(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		seqs := appendOK(t, j, s1, "0", "1", "2", "3", "4", "5", "6", "7")
		if err := j.dropThrough(ctx, s1, seqs[4]); err != nil {
			t.Fatal(err)
		}
		if kept, err := j.KeptFrom(ctx, s1); err != nil || kept != seqs[5] {
			t.Fatalf("KeptFrom = %d, %v; want %d", kept, err, seqs[5])
		}
		f := followOK(t, j, s1, 0)
		if got := datas(receive(t, f, 3)); !equal(got, []string{"5", "6", "7"}) {
			t.Fatalf("followed %v", got)
		}
	})
}

func TestFollowBadInput(t *testing.T) {
	j := (&harness{t: t, dir: t.TempDir()}).open(Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		session string
		after   uint64
		want    error
	}{
		{"no session", "", 0, ErrBadSession},
		{"long session", string(make([]byte, MaxSessionBytes+1)), 0, ErrBadSession},
		{"past the last sequence", s1, math.MaxUint64, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := j.Follow(ctx, tc.session, tc.after)
			if err == nil {
				f.Close()
				t.Fatal("Follow did not refuse")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Follow: %v, want %v", err, tc.want)
			}
		})
	}
	consumers(t, j, 0)
}

// TestFollowReconnect drops the follower's connection (the server keeps
// running and keeps the consumer): it takes up where it was.
func TestFollowReconnect(t *testing.T) {
	modes(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.open(Config{})
		f := followOK(t, j, s1, 0)
		first, err := appendNumbered(ctx, j, s1, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		got := receiveThrough(t, f, first[len(first)-1])
		back := j.nc.StatusChanged(nats.CONNECTED)
		if err := j.nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-back:
		case <-time.After(waitLimit):
			t.Fatalf("no reconnect in %v", waitLimit)
		}
		more, err := appendNumbered(ctx, j, s1, 50, 50)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, receiveThrough(t, f, more[len(more)-1])...)
		sameEntries(t, got, readOK(t, j, []string{s1}, 0, MaxReadLimit))
		if extra := rest(t, f); len(extra) != 0 {
			t.Fatalf("%d entries after the last appended", len(extra))
		}
	})
}

// fakeMsg is a delivery whose consumer and stream sequences a test sets.
type fakeMsg struct {
	jetstream.Msg
	subject          string
	consumer, stream uint64
}

func (m fakeMsg) Subject() string { return m.subject }

func (m fakeMsg) Headers() nats.Header { return nil }

func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Consumer: m.consumer, Stream: m.stream}}, nil
}

func (m fakeMsg) Data() []byte { return []byte("fake") }

// TestFollowDistrustsItsConsumer hands the follower deliveries its
// consumer should never make: one that skips a delivery, and one of an
// entry already delivered. Neither reaches the reader, and the follower
// goes on from the last entry it delivered.
func TestFollowDistrustsItsConsumer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		skip      uint64 // added to the next delivery count
		streamSeq func(last uint64) uint64
	}{
		{"skipped delivery", 2, func(last uint64) uint64 { return last + 100 }},
		{"entry delivered before", 1, func(last uint64) uint64 { return last }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := (&harness{t: t, dir: t.TempDir()}).open(Config{})
			f := followOK(t, j, s1, 0)
			appendOK(t, j, s1, "a", "b")
			got := receive(t, f, 2)

			f.mu.Lock()
			gen, dseq := f.gen, f.dseq
			f.mu.Unlock()
			f.deliver(gen, fakeMsg{subject: f.subject, consumer: dseq + tc.skip, stream: tc.streamSeq(got[1].Seq)})

			seqs := appendOK(t, j, s1, "c", "d")
			got = append(got, receiveThrough(t, f, seqs[1])...)
			if !equal(datas(got), []string{"a", "b", "c", "d"}) {
				t.Fatalf("followed %v", datas(got))
			}
			if extra := rest(t, f); len(extra) != 0 {
				t.Fatalf("%d entries after the last appended", len(extra))
			}
		})
	}
}
