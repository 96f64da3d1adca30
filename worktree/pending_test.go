//go:build unix

package worktree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// The helper process: the test binary run again to make one tree in
// another process, which a git hook can kill as a crash would, or which
// holds its claim until its stdin closes.
const (
	helperEnv  = "AHPD_WORKTREE_HELPER" // the folder to make a tree from
	helperName = "AHPD_WORKTREE_HELPER_NAME"
	helperOwn  = "AHPD_WORKTREE_HELPER_OWNER"
)

// TestHelperProcess is not a test: it is the helper process, and does
// nothing when run as a test.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		return
	}
	m := NewManager("", nil)
	m.SetRecords(os.Getenv(helperOwn), nil)
	tr, err := m.Create(context.Background(), Spec{Dir: dir, Name: os.Getenv(helperName)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Made and never settled: the caller is still to record it. Say so,
	// and hold the claim until told to end.
	fmt.Println(tr.Path)
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // what it says, line by line
	done  chan struct{} // closed once it has exited and been waited for
}

// startHelper starts a helper making a tree named name from dir for
// owner. It is ended, and waited for, when the test ends.
func startHelper(t *testing.T, dir, name, owner string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperName+"="+name, helperOwn+"="+owner)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 1), done: make(chan struct{})}
	go func() {
		// Read all it says before Wait closes the pipe.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default: // nobody asked for more than the first
			}
		}
		_ = cmd.Wait()
		close(h.lines)
		close(h.done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-h.done
		}
	})
	return h
}

// made reads the path of the tree the helper made and holds.
func (h *helper) made(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatal("the helper made no tree")
		}
		return line
	case <-time.After(testwait.Hang):
		t.Fatal("the helper made no tree")
	}
	return ""
}

// wait waits for the helper to exit and returns how it did.
func (h *helper) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(testwait.Hang):
		t.Fatal("the helper did not exit")
	}
	return h.cmd.ProcessState
}

// killHook is a git hook that, the first time cond holds, kills the
// helper process the test started (the ancestor of the hook whose parent
// is the test), and with withGit every git between the two, as a crash of
// the helper's process group would.
func killHook(cond string, withGit bool) string {
	return fmt.Sprintf(`#!/bin/sh
%s
rm -f "$0"
ppid() { sed 's/.*) //' /proc/$1/stat | cut -d' ' -f2; }
gits=
p=$PPID
while [ "$(ppid $p)" != %d ]; do
	[ "$p" -gt 1 ] || exit 0
	gits="$gits $p"
	p=$(ppid $p)
done
[ %t = true ] || gits=
kill -9 $gits $p
`, cond, os.Getpid(), withGit)
}

// waitUnclaimed waits until nothing holds the claim of the tree at path:
// git, when the helper died alone, finishes without it.
func waitUnclaimed(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(claimFile(path))
	if os.IsNotExist(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	free := make(chan error, 1)
	go func() { free <- lockWait(f) }()
	select {
	case err := <-free:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Hang):
		t.Fatalf("the claim of %s is still held", path)
	}
}

// lockWait takes f's lock, waiting for whoever holds it to let go, and
// lets go of it again.
func lockWait(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// linked returns the linked trees of repo, and its branches but main.
func linked(t *testing.T, repo string) (trees, branches []string) {
	t.Helper()
	wts, err := Worktrees(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wts[1:] {
		trees = append(trees, w.Path)
	}
	slices.Sort(trees)
	for _, b := range strings.Fields(gitT(t, repo, "branch", "--format=%(refname:short)")) {
		if b != "main" {
			branches = append(branches, b)
		}
	}
	return trees, branches
}

func requireUnix(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the kill hooks find the helper through /proc")
	}
}

// TestSweepAfterCrash kills a Create at the points where a crash leaves
// different things behind, and checks a sweep by another process takes all
// of them away: the reserved folder, the branch, the registered tree
// (locked "initializing" by git until it finishes), and the claim.
func TestSweepAfterCrash(t *testing.T) {
	requireUnix(t)
	for _, tc := range []struct {
		name, hook, cond string
		withGit          bool
		branch           bool // the crash leaves the branch
	}{
		{"folder reserved", "reference-transaction",
			`[ "$1" = prepared ] && [ -d .git ] && grep -q ' refs/heads/s1$' || exit 0`, true, false},
		{"branch made", "reference-transaction",
			`[ "$1" = committed ] && [ -d .git ] && grep -q ' refs/heads/s1$' || exit 0`, true, true},
		{"checking out", "reference-transaction",
			`[ "$1" = prepared ] && [ -f .git ] && grep -q ' refs/heads/s1$' || exit 0`, true, true},
		{"tree made", "post-checkout", `[ -f .git ] || exit 0`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newRepo(t, "")
			hook := filepath.Join(repo, ".git", "hooks", tc.hook)
			writeFile(t, hook, killHook(tc.cond, tc.withGit), 0o755)
			tree := filepath.Join(repo+".worktrees", "s1")

			h := startHelper(t, repo, "s1", "")
			if st := h.wait(t); st.Success() || exists(hook) {
				t.Fatalf("the helper was not killed by the hook: %v", st)
			}
			waitUnclaimed(t, tree)
			if !exists(claimFile(tree)) || !exists(tree) {
				t.Fatal("the crash left no claim or no folder")
			}
			if _, branches := linked(t, repo); (len(branches) == 1) != tc.branch {
				t.Fatalf("the crash left branches %q", branches)
			}

			m := NewManager("", nil)
			if n, err := m.Sweep(context.Background(), repo); n != 1 || err != nil {
				t.Fatalf("Sweep = %d, %v; want 1 claim taken up", n, err)
			}
			if trees, branches := linked(t, repo); trees != nil || branches != nil {
				t.Errorf("left trees %q, branches %q", trees, branches)
			}
			if exists(repo + ".worktrees") {
				entries, _ := os.ReadDir(repo + ".worktrees")
				t.Errorf("the location is left, holding %v", entries)
			}
			if n, err := m.Sweep(context.Background(), repo); n != 0 || err != nil {
				t.Errorf("a second Sweep = %d, %v", n, err)
			}
			// The name is free again.
			if tr := create(t, m, Spec{Dir: repo, Name: "s1"}); tr.Path != tree {
				t.Errorf("the next tree is %s, want %s", tr.Path, tree)
			}
		})
	}
}

// TestSweepKeeps checks what a sweep must leave: a settled tree, a tree
// whose claim is held by the live process making it, and one whose claim
// names another keeper of records; and that it settles rather than takes
// a tree the keeper's records hold.
func TestSweepKeeps(t *testing.T) {
	requireUnix(t)
	ctx := context.Background()
	repo := newRepo(t, "")
	m := NewManager("", nil)

	settled := create(t, m, Spec{Dir: repo, Name: "settled"})
	m.Settle(settled)
	if exists(claimFile(settled.Path)) {
		t.Error("Settle left the claim")
	}
	// In flight in this process: made, not settled yet.
	inFlight := create(t, m, Spec{Dir: repo, Name: "inflight"})
	// In flight in another process, which still runs.
	h := startHelper(t, repo, "live", "")
	live := h.made(t)

	other := NewManager("", nil)
	for _, sweeper := range []*Manager{m, other} {
		if n, err := sweeper.Sweep(ctx, repo); n != 0 || err != nil {
			t.Fatalf("Sweep = %d, %v; want nothing taken", n, err)
		}
	}
	trees, branches := linked(t, repo)
	if want := []string{inFlight.Path, live, settled.Path}; !slices.Equal(trees, want) || len(branches) != 3 {
		t.Fatalf("after sweeping: trees %q (want %q), branches %q", trees, want, branches)
	}

	// Once the helper has ended, its claim is nobody's, and its tree goes
	// with it; the claim of this process's unsettled tree stays.
	h.stdin.Close()
	if st := h.wait(t); !st.Success() {
		t.Fatalf("the helper failed: %v", st)
	}
	if n, err := other.Sweep(ctx, repo); n != 1 || err != nil {
		t.Fatalf("Sweep after the helper ended = %d, %v", n, err)
	}
	if trees, _ := linked(t, repo); !slices.Equal(trees, []string{inFlight.Path, settled.Path}) {
		t.Errorf("after the helper ended: trees %q", trees)
	}

	// A claim of another keeper is left for it; its own sweep settles a
	// tree its records hold, and takes one they do not.
	// Both made before either ends: a Create of the keeper would sweep
	// the other's claim once its maker ended.
	kept := startHelper(t, repo, "kept", "keeper")
	keptPath := kept.made(t)
	lost := startHelper(t, repo, "lost", "keeper")
	lostPath := lost.made(t)
	for _, h := range []*helper{kept, lost} {
		h.stdin.Close()
		h.wait(t)
	}
	if n, err := other.Sweep(ctx, repo); n != 0 || err != nil {
		t.Fatalf("Sweep of another keeper's claims = %d, %v", n, err)
	}
	keeper := NewManager("", nil)
	keeper.SetRecords("keeper", func(path string) bool { return path == keptPath })
	if n, err := keeper.Sweep(ctx, repo); n != 2 || err != nil {
		t.Fatalf("the keeper's Sweep = %d, %v; want 2", n, err)
	}
	if exists(claimFile(keptPath)) || exists(claimFile(lostPath)) {
		t.Error("the keeper's sweep left a claim")
	}
	trees, branches = linked(t, repo)
	if want := []string{inFlight.Path, keptPath, settled.Path}; !slices.Equal(trees, want) {
		t.Errorf("after the keeper's sweep: trees %q, want %q", trees, want)
	}
	if slices.Contains(branches, "lost") || !slices.Contains(branches, "kept") {
		t.Errorf("after the keeper's sweep: branches %q", branches)
	}

	// Removing a tree settles it: its kept branch is no sweep's.
	if kept, why, err := m.Remove(ctx, inFlight); err != nil || kept {
		t.Fatalf("Remove = %v, %q, %v", kept, why, err)
	}
	if exists(claimFile(inFlight.Path)) {
		t.Error("Remove left the claim")
	}
	if n, err := other.Sweep(ctx, repo); n != 0 || err != nil {
		t.Errorf("Sweep after Remove = %d, %v", n, err)
	}
	if _, branches := linked(t, repo); !slices.Contains(branches, "inflight") {
		t.Errorf("the removed tree's branch went: %q", branches)
	}
}

// TestSweepKeepsMovedBranch checks a sweep keeps the branch of an
// unfinished tree once commits were made on it: somebody worked there.
func TestSweepKeepsMovedBranch(t *testing.T) {
	requireUnix(t)
	ctx := context.Background()
	repo := newRepo(t, "")
	h := startHelper(t, repo, "worked", "")
	tree := h.made(t)
	writeFile(t, filepath.Join(tree, "work"), "x\n", 0o644)
	gitT(t, tree, "add", "work")
	gitT(t, tree, "commit", "-q", "-m", "work")
	h.stdin.Close()
	h.wait(t)
	lb, buf := newLog()
	if n, err := NewManager("", lb).Sweep(ctx, repo); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if trees, branches := linked(t, repo); trees != nil || !slices.Equal(branches, []string{"worked"}) {
		t.Errorf("trees %q, branches %q; want the branch alone", trees, branches)
	}
	if !strings.Contains(buf.String(), "kept the branch") {
		t.Errorf("the log does not say the branch was kept:\n%s", buf)
	}
}

// TestSweepLeavesStrangers checks a sweep leaves what no claim of its
// repository names: a folder nobody claimed, another repository's claim
// under a shared root, and a claim it cannot read.
func TestSweepLeavesStrangers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	a := newRepo(t, "")
	b := newRepo(t, "") // also named "repo": the two share <root>/repo
	m := NewManager(root, nil)
	ta := create(t, m, Spec{Dir: a, Name: "a1"})
	m.abandon(claimFile(ta.Path)) // as if its maker had died
	loc := filepath.Dir(ta.Path)
	writeFile(t, filepath.Join(loc, "stranger", "f"), "x", 0o644)
	writeFile(t, filepath.Join(loc, ".junk"+claimSuffix), "not json", 0o644)

	n, err := m.Sweep(ctx, b)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "no claim this ahpd can read") {
		t.Errorf("Sweep of b = %d, %v; want nothing taken and the unreadable claim named", n, err)
	}
	if !exists(ta.Path) || !exists(claimFile(ta.Path)) {
		t.Error("the sweep of b took a's tree")
	}
	if n, _ := m.Sweep(ctx, a); n != 1 || exists(ta.Path) {
		t.Errorf("Sweep of a = %d; tree left: %v", n, exists(ta.Path))
	}
	if !exists(filepath.Join(loc, "stranger", "f")) {
		t.Error("a sweep took a folder nobody claimed")
	}
}

// TestClaimTempOfDeadWriter checks a Create takes away the temporary file
// a claim's writer died writing, and leaves one of a live writer.
func TestClaimTempOfDeadWriter(t *testing.T) {
	requireUnix(t)
	repo := newRepo(t, "")
	loc := repo + ".worktrees"
	// A pid no process can have.
	max, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(max)))
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(loc, claimTemp+strconv.Itoa(pidMax+1)+"-1.tmp")
	mine := filepath.Join(loc, claimTemp+strconv.Itoa(os.Getpid())+"-1.tmp")
	writeFile(t, dead, "{", 0o644)
	writeFile(t, mine, "{", 0o644)
	create(t, NewManager("", nil), Spec{Dir: repo, Name: "s1"})
	if exists(dead) || !exists(mine) {
		t.Errorf("dead writer's temporary file left: %v; live one's taken: %v", exists(dead), !exists(mine))
	}
}

// TestCancelledCreate cancels a Create while git makes the tree: git is
// killed part way, and Create takes away what it made, once the hook git
// was running (which holds the claim too) has ended.
func TestCancelledCreate(t *testing.T) {
	repo := newRepo(t, "")
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	for _, fifo := range []string{started, release} {
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(repo, ".git", "hooks", "post-checkout"), fmt.Sprintf(`#!/bin/sh
[ -f .git ] || exit 0
echo started > %q
cat %q > /dev/null
`, started, release), 0o755)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := NewManager("", nil)
	type result struct {
		tr  *Tree
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := m.Create(ctx, Spec{Dir: repo, Name: "s1"})
		done <- result{tr, err}
	}()
	// The tree is made and git runs its hook: cancel now, then let the
	// hook end.
	if _, err := os.ReadFile(started); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, context.Canceled) || r.tr != nil {
		t.Fatalf("Create = %v, %v; want the cancellation", r.tr, r.err)
	}
	if trees, branches := linked(t, repo); trees != nil || branches != nil {
		t.Errorf("left trees %q, branches %q", trees, branches)
	}
	if exists(repo + ".worktrees") {
		entries, _ := os.ReadDir(repo + ".worktrees")
		t.Errorf("the location is left, holding %v", entries)
	}
}
