package checkpoints

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Shape of the benchmark repository: 20,000 files of 2 KiB in 200
// directories, 50 of them changed per turn.
const (
	benchDirs        = 200
	benchFilesPerDir = 100
	benchLines       = 32 // of 64 bytes each: 2 KiB per file
	benchChanged     = 50
)

// benchRepo generates and commits the benchmark repository and returns its
// directory and the files a turn changes, spread over the directories.
func benchRepo(b *testing.B) (dir string, changed []string) {
	b.Helper()
	dir = newRepo(b, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var line [63]byte
	var sb strings.Builder
	for d := range benchDirs {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d/20), fmt.Sprintf("dir%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range benchFilesPerDir {
			sb.Reset()
			for range benchLines {
				for i := range line {
					line[i] = 'a' + byte(rng.IntN(26))
				}
				sb.Write(line[:])
				sb.WriteByte('\n')
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%03d.txt", f)), []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	run(b, dir, "add", "-A")
	run(b, dir, "commit", "-q", "-m", "20,000 files")
	settle(b)
	step := benchDirs * benchFilesPerDir / benchChanged
	for i := range benchChanged {
		n := i * step
		d, f := n/benchFilesPerDir, n%benchFilesPerDir
		changed = append(changed, filepath.Join(fmt.Sprintf("pkg%03d", d/20), fmt.Sprintf("dir%03d", d), fmt.Sprintf("file%03d.txt", f)))
	}
	return dir, changed
}

// settle flushes written files to disk where a sync command exists, so
// that the kernel's write-back of the setup's 40 MB, or of a turn's edits,
// does not land in whichever timing happens to run next.
func settle(b *testing.B) {
	b.Helper()
	if path, err := exec.LookPath("sync"); err == nil {
		if out, err := exec.Command(path).CombinedOutput(); err != nil {
			b.Logf("sync: %v: %s", err, out)
		}
	}
}

// change rewrites the first line of each file, keeping its size.
func change(b *testing.B, dir string, files []string, version int) {
	b.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		c, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		copy(c, fmt.Sprintf("%-63d", version))
		if err := os.WriteFile(p, c, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// baselineSnapshot is the least any temporary-index snapshot must do: copy
// the index, git add -A, git write-tree. The temporary directory is made
// and removed outside the timing, so the baseline is if anything flattered.
func baselineSnapshot(b *testing.B, dir, index string) time.Duration {
	b.Helper()
	tmp, err := os.MkdirTemp("", "ahpd-baseline-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	tmpIndex := filepath.Join(tmp, "index")
	env := append(os.Environ(), "GIT_INDEX_FILE="+tmpIndex)

	start := time.Now()
	in, err := os.Open(index)
	if err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(tmpIndex)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	in.Close()
	out.Close()
	for _, args := range [][]string{{"add", "-A"}, {"write-tree"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return time.Since(start)
}

func medianMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return float64(m) / float64(time.Millisecond)
}

// BenchmarkCapture measures one turn's capture in a 20,000-file repository
// with 50 files changed, against the bare temporary-index baseline on the
// same kind of change. Both sides see fresh content each time, and they
// alternate which goes first.
func BenchmarkCapture(b *testing.B) {
	ctx := context.Background()
	dir, changed := benchRepo(b)
	r := open(b, dir)
	if _, err := r.Capture(ctx, "bench", 0); err != nil {
		b.Fatal(err)
	}
	var captures, baselines []time.Duration
	turn, version := 1, 0
	for b.Loop() {
		for i := range 2 {
			version++
			change(b, dir, changed, version)
			settle(b)
			if (turn+i)%2 == 0 {
				start := time.Now()
				if _, err := r.Capture(ctx, "bench", turn); err != nil {
					b.Fatal(err)
				}
				captures = append(captures, time.Since(start))
			} else {
				baselines = append(baselines, baselineSnapshot(b, dir, r.index))
			}
		}
		turn++
	}
	c, base := medianMs(captures), medianMs(baselines)
	b.ReportMetric(c, "capture-ms")
	b.ReportMetric(base, "baseline-ms")
	if base > 0 {
		b.ReportMetric(c/base, "capture/baseline")
	}
}

// BenchmarkChanges measures Session Changes (turn 0 against the latest of
// two checkpoints, 50 files apart) and Branch Changes (a linked worktree
// with 50 files committed on its branch, 50 more changed on disk and a few
// new ones) in a 20,000-file repository.
func BenchmarkChanges(b *testing.B) {
	ctx := context.Background()
	dir, changed := benchRepo(b)
	r := open(b, dir)
	if _, err := r.Capture(ctx, "bench", 0); err != nil {
		b.Fatal(err)
	}
	change(b, dir, changed, 1)
	if _, err := r.Capture(ctx, "bench", 1); err != nil {
		b.Fatal(err)
	}

	wt := filepath.Join(filepath.Dir(dir), "wt")
	run(b, dir, "worktree", "add", "-q", "-b", "feature", wt, "main")
	change(b, wt, changed, 2)
	run(b, wt, "commit", "-q", "-a", "-m", "feature work")
	uncommitted := make([]string, len(changed))
	for i, f := range changed {
		uncommitted[i] = strings.Replace(f, "file000", "file001", 1)
	}
	change(b, wt, uncommitted, 3)
	for i := range 5 {
		write(b, wt, fmt.Sprintf("new/file%d.txt", i), "new\n")
	}
	settle(b)

	var session, branch []time.Duration
	for b.Loop() {
		start := time.Now()
		s, err := r.SessionChanges(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		session = append(session, time.Since(start))
		if s.Files != benchChanged {
			b.Fatalf("SessionChanges = %+v", s)
		}

		start = time.Now()
		s, err = r.BranchChanges(ctx, wt, "main")
		if err != nil {
			b.Fatal(err)
		}
		branch = append(branch, time.Since(start))
		if s.Files != 2*benchChanged+5 {
			b.Fatalf("BranchChanges = %+v", s)
		}
	}
	b.ReportMetric(medianMs(session), "session-changes-ms")
	b.ReportMetric(medianMs(branch), "branch-changes-ms")
}

// BenchmarkOwnChanges measures a folder session's counts in the
// 20,000-file repository after 100 turns, each changing 50 of 500 files
// (a window moving by 10, so each turn changes 40 files an earlier turn
// changed): what a turn's end now costs (its diff against its start,
// folded into the Own, and the count of the two small trees) against the
// one diff the old count was (turn 0 against the last), the snapshot a
// turn's start now costs in a folder that did not change since the last
// checkpoint, and reading every turn back after a restart.
func BenchmarkOwnChanges(b *testing.B) {
	ctx := context.Background()
	dir, _ := benchRepo(b)
	r := open(b, dir)
	const distinct, perTurn, shift, turns = 500, 50, 10, 100
	step := benchDirs * benchFilesPerDir / distinct
	var files []string
	for i := range distinct {
		n := i * step
		d, f := n/benchFilesPerDir, n%benchFilesPerDir
		files = append(files, filepath.Join(fmt.Sprintf("pkg%03d", d/20), fmt.Sprintf("dir%03d", d), fmt.Sprintf("file%03d.txt", f)))
	}
	window := func(turn int) []string {
		var w []string
		for i := range perTurn {
			w = append(w, files[(turn*shift+i)%distinct])
		}
		return w
	}
	last, err := r.Capture(ctx, "bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	base := last
	var own Own
	turn := 1
	endTurn := func() (commit string) {
		b.Helper()
		change(b, dir, window(turn), turn)
		tree, err := r.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if commit, err = r.RecordAfter(ctx, "bench", turn, tree, last); err != nil {
			b.Fatal(err)
		}
		last = commit
		turn++
		return commit
	}
	fold := func(commit string) Stats {
		b.Helper()
		t, err := r.TurnChanges(ctx, []string{commit})
		if err != nil {
			b.Fatal(err)
		}
		own.Add(t[0])
		st, err := r.Count(ctx, &own)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	for turn <= turns {
		fold(endTurn())
	}
	settle(b)

	var starts, folds, olds []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := r.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
		starts = append(starts, time.Since(start))
		commit := endTurn()
		settle(b)

		start = time.Now()
		st := fold(commit)
		folds = append(folds, time.Since(start))
		if st.Files != distinct {
			b.Fatalf("own changes %+v, want %d files", st, distinct)
		}

		start = time.Now()
		if _, err := r.Diff(ctx, base, commit); err != nil {
			b.Fatal(err)
		}
		olds = append(olds, time.Since(start))
	}
	start := time.Now()
	o, err := r.OwnChanges(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	st, err := r.Count(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	reread := time.Since(start)
	if want, _ := r.Count(ctx, &own); st != want {
		b.Fatalf("read back %+v, counted turn by turn %+v", st, want)
	}
	b.ReportMetric(float64(turn-1), "turns")
	b.ReportMetric(medianMs(starts), "start-snapshot-ms")
	b.ReportMetric(medianMs(folds), "turn-count-ms")
	b.ReportMetric(medianMs(olds), "old-count-ms")
	b.ReportMetric(float64(reread)/float64(time.Millisecond), "reread-all-ms")
}
