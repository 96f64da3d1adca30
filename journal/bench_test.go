package journal

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A turn is 2 KB of text streamed as deltas of about 100 bytes.
const (
	turnDeltas = 20
	deltaBytes = 100
)

// prose is the vocabulary of the text an agent streams in the
// benchmarks: words drawn at random from it compress about as well as
// English, where repeating one delta would compress far too well.
const prose = `The function reads the configuration once at start and keeps it in memory; ` +
	`a change on disk is picked up by the watcher, which validates the new file before ` +
	`swapping it in, so a half-written edit never takes effect. Tests cover the three ` +
	`cases: a valid change, an invalid one that is logged and ignored, and a removal. ` +
	`Next I will run go test ./... and fix whatever fails in handler.go, store.go or main.go.`

// text is 64 KB of words from prose in a fixed random order.
var text = func() []byte {
	words := strings.Fields(prose)
	r := rand.New(rand.NewPCG(1, 2))
	var b []byte
	for len(b) < 64<<10 {
		b = append(b, words[r.IntN(len(words))]...)
		b = append(b, ' ')
	}
	return b
}()

// deltas returns n deltas of deltaBytes each, cut from text from the k-th.
func deltas(k, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		off := ((k + i) * deltaBytes) % (len(text) - deltaBytes)
		out[i] = text[off : off+deltaBytes]
	}
	return out
}

func openBench(b *testing.B, dir string, cfg Config) *Journal {
	b.Helper()
	cfg.Dir = dir
	j, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkAppend50Sessions streams deltas into 50 sessions at once.
// batch is how many deltas one Append carries: 1 is a host appending each
// action as it is emitted, 20 a whole turn's deltas at once; sync
// fsyncs every append.
func BenchmarkAppend50Sessions(b *testing.B) {
	for _, tc := range []struct {
		batch int
		sync  bool
	}{{1, false}, {5, false}, {turnDeltas, false}, {1, true}, {turnDeltas, true}} {
		batch := tc.batch
		b.Run(fmt.Sprintf("batch=%d/sync=%v", batch, tc.sync), func(b *testing.B) {
			j := openBench(b, b.TempDir(), Config{SyncAlways: tc.sync})
			defer closeJournal(b, j)
			const sessions = 50
			var next atomic.Int64 // entries claimed so far
			b.SetBytes(deltaBytes)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for s := range sessions {
				wg.Go(func() {
					session := fmt.Sprintf("ahp-session://bench/%d", s)
					for {
						k := next.Add(int64(batch)) - int64(batch)
						if k >= int64(b.N) {
							return
						}
						if _, err := j.Append(context.Background(), session, deltas(int(k), batch)...); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
		})
	}
}

// BenchmarkReplay reads one session of 10,000 deltas back, in pages of
// MaxReadLimit, out of a journal also holding 49 other sessions' entries
// interleaved with it.
func BenchmarkReplay(b *testing.B) {
	for _, uncompressed := range []bool{false, true} {
		b.Run(fmt.Sprintf("uncompressed=%v", uncompressed), func(b *testing.B) {
			j := openBench(b, b.TempDir(), Config{Uncompressed: uncompressed})
			defer closeJournal(b, j)
			fillSessions(b, j, 50, 10000)
			b.ResetTimer()
			start := time.Now()
			read := 0
			for b.Loop() {
				read += readAll(b, j, "s/7")
			}
			b.ReportMetric(float64(read)/time.Since(start).Seconds(), "entries/s")
		})
	}
}

// fillSessions appends perSession deltas to each of sessions sessions
// named s/0, s/1, ..., a turn of each in turn.
func fillSessions(b *testing.B, j *Journal, sessions, perSession int) {
	b.Helper()
	for t := range perSession / turnDeltas {
		for s := range sessions {
			if _, err := j.Append(context.Background(), fmt.Sprintf("s/%d", s), deltas(t*sessions+s, turnDeltas)...); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// readAll reads a session whole, page by page, and returns its length.
func readAll(b *testing.B, j *Journal, session string) int {
	b.Helper()
	read := 0
	for after := uint64(0); ; {
		page, err := j.Read(context.Background(), session, after, MaxReadLimit)
		if err != nil {
			b.Fatal(err)
		}
		read += len(page)
		if len(page) < MaxReadLimit {
			return read
		}
		after = page[len(page)-1].Seq
	}
}

// dirSize is the bytes of the files under dir, as their lengths and as
// the disk blocks they take.
func dirSize(b *testing.B, dir string) (apparent, allocated int64) {
	b.Helper()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return apparent, allocated
}

// BenchmarkDiskPerTurn journals turns of 2 KB as 100-byte deltas and
// reports what the store grew by per turn, once the journal is closed.
func BenchmarkDiskPerTurn(b *testing.B) {
	for _, uncompressed := range []bool{false, true} {
		b.Run(fmt.Sprintf("uncompressed=%v", uncompressed), func(b *testing.B) {
			cfg := Config{Uncompressed: uncompressed}
			dir := b.TempDir()
			closeJournal(b, openBench(b, dir, cfg))
			base, baseAlloc := dirSize(b, dir)
			j := openBench(b, dir, cfg)
			turns := 0
			for b.Loop() {
				session := fmt.Sprintf("claude:/6f1c2d3e-4b5a-4c6d-8e9f-%012d", turns%50)
				if _, err := j.Append(context.Background(), session, deltas(turns*turnDeltas, turnDeltas)...); err != nil {
					b.Fatal(err)
				}
				turns++
			}
			b.StopTimer()
			closeJournal(b, j)
			size, alloc := dirSize(b, dir)
			b.ReportMetric(float64(size-base)/float64(turns), "bytes/turn")
			b.ReportMetric(float64(alloc-baseAlloc)/float64(turns), "diskbytes/turn")
		})
	}
}

// BenchmarkColdOpen1000Sessions opens a journal of 1,000 sessions of 100
// deltas each and asks for the newest sequence, as a restarting host does.
func BenchmarkColdOpen1000Sessions(b *testing.B) {
	dir := b.TempDir()
	j := openBench(b, dir, Config{})
	for s := range 1000 {
		for t := range 5 {
			if _, err := j.Append(context.Background(), fmt.Sprintf("ahp-session://claude/%d", s), deltas(s*5+t, turnDeltas)...); err != nil {
				b.Fatal(err)
			}
		}
	}
	closeJournal(b, j)
	b.ResetTimer()
	for b.Loop() {
		j := openBench(b, dir, Config{})
		if _, err := j.LastSeq(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := j.SessionLastSeq(context.Background(), "ahp-session://claude/500"); err != nil {
			b.Fatal(err)
		}
		closeJournal(b, j)
	}
}

// BenchmarkAppendOne is one session appending one delta at a time and
// waiting for each: ns/op is what an append adds to an action's way out.
func BenchmarkAppendOne(b *testing.B) {
	j := openBench(b, b.TempDir(), Config{})
	defer closeJournal(b, j)
	i := 0
	for b.Loop() {
		if _, err := j.Append(context.Background(), "claude:/one", deltas(i, 1)...); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkReadTail reads the newest turn (20 deltas) of one session, and
// of 20 sessions at once, as a client reconnecting after a short gap does:
// ns/op is the cost of a small read, mostly setting up its consumer.
func BenchmarkReadTail(b *testing.B) {
	j := openBench(b, b.TempDir(), Config{})
	defer closeJournal(b, j)
	fillSessions(b, j, 50, 200)
	var sessions []string
	for s := range 20 {
		sessions = append(sessions, fmt.Sprintf("s/%d", s))
	}
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			last, err := j.LastSeq(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			after := last - uint64(50*turnDeltas) // the last turn of each session
			for b.Loop() {
				page, err := j.ReadSessions(context.Background(), sessions[:n], after, 0)
				if err != nil || len(page) != n*turnDeltas {
					b.Fatalf("read %d entries, %v; want %d", len(page), err, n*turnDeltas)
				}
			}
		})
	}
}

// BenchmarkReadUnderLoad reads one session of 10,000 entries back, in
// pages of MaxReadLimit, while 6 other sessions append a turn at a time as
// fast as they can: entries/s is the read's pace, lost/op the entries a
// read missed (a short page taken for the end), which must be 0.
func BenchmarkReadUnderLoad(b *testing.B) {
	j := openBench(b, b.TempDir(), Config{})
	defer closeJournal(b, j)
	const n = 10000
	appendCounted(b, j, "s/read", n, 500)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := j.Append(context.Background(), fmt.Sprintf("s/load/%d", w), deltas(i, turnDeltas)...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	read, lost := 0, 0
	for b.Loop() {
		got := readAll(b, j, "s/read")
		read += got
		lost += n - got
	}
	b.ReportMetric(float64(read)/time.Since(start).Seconds(), "entries/s")
	b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
}

// BenchmarkChunkedEntry appends an entry of 2 MB (three messages of the
// server's 1 MiB payload), or 33 MB, and reads it back, in a session of
// such entries: ms/append is the append's time, ms/read a read after the
// entry before it, ms/read-inside one that starts inside the entry (after
// its Seq-1) and goes back for its first chunks; MB/s is all three's.
func BenchmarkChunkedEntry(b *testing.B) {
	for _, size := range []int{2 << 20, 33 << 20} {
		b.Run(fmt.Sprintf("MB=%d", size>>20), func(b *testing.B) {
			j := openBench(b, b.TempDir(), Config{})
			defer closeJournal(b, j)
			entry := text
			for len(entry) < size {
				entry = append(entry, text...)
			}
			entry = entry[:size]
			b.SetBytes(int64(size))
			var appending, reading, inside time.Duration
			read := func(after uint64, took *time.Duration) {
				start := time.Now()
				got, err := j.Read(context.Background(), "s/big", after, 1)
				*took += time.Since(start)
				if err != nil || len(got) != 1 || len(got[0].Data) != size {
					b.Fatalf("read %d entries, %v", len(got), err)
				}
			}
			var prev uint64
			for b.Loop() {
				start := time.Now()
				seqs, err := j.Append(context.Background(), "s/big", entry)
				if err != nil {
					b.Fatal(err)
				}
				appending += time.Since(start)
				read(prev, &reading)
				read(seqs[0]-1, &inside)
				prev = seqs[0]
			}
			ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
			b.ReportMetric(ms(appending), "ms/append")
			b.ReportMetric(ms(reading), "ms/read")
			b.ReportMetric(ms(inside), "ms/read-inside")
		})
	}
}
