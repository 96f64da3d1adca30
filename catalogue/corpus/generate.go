package corpus

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Spec describes a corpus of many transcripts.
type Spec struct {
	Files   int
	Folders int
	Seed    uint64
	// Now is the newest transcript's time; older ones go back 60 days.
	Now time.Time
}

// Plan returns the sessions of a corpus. Sizes follow a long tail, as
// people's histories do: most transcripts are a few kilobytes, about one
// in ten is past a quarter megabyte, a few dozen are tens of megabytes,
// and the largest is 50 MB. Ten thousand come to about 3.6 GB.
func Plan(spec Spec) []Session {
	r := rand.New(rand.NewPCG(spec.Seed, 42))
	logUniform := func(lo, hi float64) int64 {
		return int64(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
	}
	out := make([]Session, spec.Files)
	for i := range out {
		var size int64
		switch p := r.Float64(); {
		case i == 0:
			size = 50 << 20
		case p < 0.62:
			size = logUniform(2<<10, 32<<10)
		case p < 0.87:
			size = logUniform(32<<10, 256<<10)
		case p < 0.977:
			size = logUniform(256<<10, 2<<20)
		case p < 0.997:
			size = logUniform(2<<20, 16<<20)
		default:
			size = logUniform(16<<20, 50<<20)
		}
		folder := i % spec.Folders
		s := Session{
			ID:        fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), i>>16, i&0xfff, folder, r.Uint64()&0xffffffffffff),
			Cwd:       fmt.Sprintf("/home/dev/src/project-%03d", folder),
			Branch:    []string{"main", "HEAD", "feature/login", "fix/race"}[r.IntN(4)],
			Start:     spec.Now.Add(-time.Duration(r.Int64N(int64(60 * 24 * time.Hour)))),
			Prompts:   []string{fmt.Sprintf("Fix the failing test number %d in the parser package", i), "Now add a benchmark", "Thanks, commit it"},
			Reminder:  r.IntN(3) == 0,
			Tools:     size >= 8<<10,
			PadTo:     size,
			Interrupt: r.IntN(10) == 0,
		}
		// A first turn that read a few files: the ai-title after it
		// lies 4-24 KB in.
		if size >= 32<<10 {
			s.FirstTurn = int(logUniform(4<<10, 24<<10))
		}
		// The smallest transcripts are a single exchange.
		switch {
		case size < 8<<10:
			s.Prompts = s.Prompts[:1]
		case size < 32<<10:
			s.Prompts = s.Prompts[:2]
		}
		// Titles as the CLI leaves them: half the sessions had one
		// generated after the first turn, and some of those wrote it
		// again near the end when resumed; a few were renamed, at any
		// point of their life; older CLIs put a summary at the top.
		if r.IntN(2) == 0 {
			s.AITitle = fmt.Sprintf("Fix parser test %d", i)
			if r.IntN(5) < 2 {
				s.TailTitle = s.AITitle
			}
		}
		if r.IntN(50) == 0 {
			s.Titles = append(s.Titles, TitleLine{Kind: AITitle, Text: fmt.Sprintf("Parser test %d, retitled", i), At: Middle})
		}
		if r.IntN(30) == 0 {
			at := []Place{AtStart, AfterFirstTurn, Middle, NearEnd, AtEnd}[r.IntN(5)]
			s.Titles = append(s.Titles, TitleLine{Kind: CustomTitle, Text: fmt.Sprintf("My parser work %d", i), At: at})
		}
		if r.IntN(30) == 0 {
			s.Titles = append(s.Titles, TitleLine{Kind: SummaryLine, Text: fmt.Sprintf("Parser test %d fixed", i), At: AtStart})
		}
		if size > 2<<20 && r.IntN(10) == 0 {
			s.HugeLast = 2 << 20
		}
		out[i] = s
	}
	return out
}

// Generate writes the corpus spec describes under projects and returns
// its size in bytes. Each file's modification time is its last line's, as
// the CLI leaves a transcript it writes line by line: a listing that reads
// the newest files first (by mtime) then meets them in its rows' order.
func Generate(projects string, spec Spec) (int64, error) {
	sessions := Plan(spec)
	var total atomic.Int64
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sessions) {
					return
				}
				path, last, err := create(projects, &sessions[i])
				if err == nil {
					err = os.Chtimes(path, last, last)
				}
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				if fi, err := os.Stat(path); err == nil {
					total.Add(fi.Size())
				}
			}
		})
	}
	wg.Wait()
	return total.Load(), first
}
