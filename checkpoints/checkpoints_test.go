package checkpoints

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCaptureWholeTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{
		".gitignore":        "*.log\nbuild/\n",
		"a.txt":             "a\n",
		"gone.txt":          "bye\n",
		"sub/dir/b.txt":     "b\n",
		"sub/dir/keep.txt":  "keep\n",
		"sub/other/c.txt":   "c\n",
		"path with space/x": "x\n",
	})
	r := open(t, dir)
	c0, err := r.Capture(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := treeOf(t, dir, c0), treeOf(t, dir, "HEAD"); !maps.Equal(got, want) {
		t.Fatalf("turn 0 = %v, want HEAD's tree %v", got, want)
	}

	write(t, dir, "a.txt", "a\nchanged\n")
	write(t, dir, "new.txt", "new\n")
	write(t, dir, "sub/dir/b.txt", "b2\n")
	write(t, dir, "sub/new/d.txt", "d\n")
	remove(t, dir, "gone.txt")
	write(t, dir, "debug.log", "ignored\n")
	write(t, dir, "build/out.bin", "ignored\n")
	write(t, dir, "sub/dir/trace.log", "ignored\n")

	c1, err := r.Capture(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		".gitignore":        "*.log\nbuild/",
		"a.txt":             "a\nchanged",
		"new.txt":           "new",
		"sub/dir/b.txt":     "b2",
		"sub/dir/keep.txt":  "keep",
		"sub/new/d.txt":     "d",
		"sub/other/c.txt":   "c",
		"path with space/x": "x",
	}
	if got := treeOf(t, dir, c1); !maps.Equal(got, want) {
		t.Errorf("turn 1 = %v\nwant %v", got, want)
	}

	// Parents chain the session's turns; turn 0 has none.
	if got := run(t, dir, "rev-list", "--parents", "-n1", c1); got != c1+" "+c0 {
		t.Errorf("turn 1 parents: %q, want %q", got, c1+" "+c0)
	}
	if got := run(t, dir, "rev-list", "--parents", "-n1", c0); got != c0 {
		t.Errorf("turn 0 has parents: %q", got)
	}
	if got := run(t, dir, "log", "-1", "--format=%an <%ae> %cn <%ce>", c1); got != "ahpd <ahpd@localhost> ahpd <ahpd@localhost>" {
		t.Errorf("identity = %q", got)
	}

	cps, err := r.Checkpoints(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	wantCps := []Checkpoint{
		{0, "refs/agents/s1/checkpoints/turn/0", c0},
		{1, "refs/agents/s1/checkpoints/turn/1", c1},
	}
	if fmt.Sprint(cps) != fmt.Sprint(wantCps) {
		t.Errorf("Checkpoints = %v, want %v", cps, wantCps)
	}

	// Capturing a turn again replaces its checkpoint, still on turn 0.
	write(t, dir, "new.txt", "newer\n")
	c1b, err := r.Capture(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", "refs/agents/s1/checkpoints/turn/1"); got != c1b || c1b == c1 {
		t.Errorf("turn 1 after recapture = %s, want %s (was %s)", got, c1b, c1)
	}
	if got := run(t, dir, "rev-parse", c1b+"^"); got != c0 {
		t.Errorf("recaptured turn 1's parent = %s, want %s", got, c0)
	}
}

func TestCaptureLeavesUserStateAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	// A stash entry, a staged change that is then changed again on disk,
	// a staged new file, an unstaged change and an untracked file.
	write(t, dir, "c.txt", "stashed\n")
	run(t, dir, "stash", "push", "-q")
	write(t, dir, "a.txt", "a staged\n")
	write(t, dir, "staged-new.txt", "staged new\n")
	run(t, dir, "add", "a.txt", "staged-new.txt")
	write(t, dir, "a.txt", "a staged then edited\n")
	write(t, dir, "b.txt", "b unstaged\n")
	write(t, dir, "untracked.txt", "untracked\n")
	run(t, dir, "status") // let git refresh the index the way a user's status would
	cached := run(t, dir, "diff", "--cached")

	before := stateOf(t, dir)
	r := open(t, dir)
	commit, err := r.Capture(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SessionChanges(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.BranchChanges(ctx, "", "main"); err != nil {
		t.Fatal(err)
	}
	checkStateUnchanged(t, before, stateOf(t, dir))
	if got := run(t, dir, "diff", "--cached"); got != cached {
		t.Errorf("staged changes differ after capture:\n%s\nwant\n%s", got, cached)
	}

	// The checkpoint holds what is on disk, not what is staged.
	want := map[string]string{
		"a.txt":          "a staged then edited",
		"b.txt":          "b unstaged",
		"c.txt":          "c",
		"staged-new.txt": "staged new",
		"untracked.txt":  "untracked",
	}
	if got := treeOf(t, dir, commit); !maps.Equal(got, want) {
		t.Errorf("checkpoint = %v, want %v", got, want)
	}
	if got := run(t, dir, "branch", "--list"); got != "* main" {
		t.Errorf("branches = %q", got)
	}
}

func TestCaptureFromSubdirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"top.txt": "top\n", "sub/inner.txt": "inner\n"})
	r := open(t, filepath.Join(dir, "sub"))
	if real, _ := filepath.EvalSymlinks(dir); r.Root() != real {
		t.Errorf("Root() = %q, want %q", r.Root(), real)
	}
	write(t, dir, "top.txt", "top changed\n")
	write(t, dir, "sub/more.txt", "more\n")
	commit, err := r.Capture(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"top.txt": "top changed", "sub/inner.txt": "inner", "sub/more.txt": "more"}
	if got := treeOf(t, dir, commit); !maps.Equal(got, want) {
		t.Errorf("checkpoint = %v, want %v", got, want)
	}
}

func TestSessionChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n", "img.bin": "\x00\x01"})
	r := open(t, dir)

	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != (Stats{}) {
		t.Fatalf("no checkpoints: %v, %v", s, err)
	}
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != (Stats{}) {
		t.Fatalf("one checkpoint: %v, %v", s, err)
	}

	// Turn 1: one line changed in a.txt, a new file of two lines, a
	// binary file changed.
	write(t, dir, "a.txt", "1\ntwo\n3\n")
	write(t, dir, "new.txt", "x\ny\n")
	write(t, dir, "img.bin", "\x00\x02\x03")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	want := Stats{Files: 3, Additions: 3, Deletions: 1}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != want {
		t.Fatalf("after turn 1: %+v, %v; want %+v", s, err, want)
	}

	// The user commits the session's work; the count must not drop.
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-q", "-m", "user commit")
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != want {
		t.Fatalf("after the user's commit: %+v, %v; want %+v", s, err, want)
	}

	// Turn 2 deletes b.txt.
	remove(t, dir, "b.txt")
	if _, err := r.Capture(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	want = Stats{Files: 4, Additions: 3, Deletions: 2}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != want {
		t.Fatalf("after turn 2: %+v, %v; want %+v", s, err, want)
	}

	cps, err := r.Checkpoints(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	files, err := r.DiffFiles(ctx, cps[0].Commit, cps[2].Commit)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileStat{}
	for _, f := range files {
		got[f.Path] = f
	}
	wantFiles := map[string]FileStat{
		"a.txt":   {Path: "a.txt", Additions: 1, Deletions: 1},
		"b.txt":   {Path: "b.txt", Deletions: 1},
		"img.bin": {Path: "img.bin", Binary: true},
		"new.txt": {Path: "new.txt", Additions: 2},
	}
	if !maps.Equal(got, wantFiles) {
		t.Errorf("DiffFiles = %+v\nwant %+v", got, wantFiles)
	}
}

func TestBranchChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
	wt := filepath.Join(filepath.Dir(dir), "wt")
	run(t, dir, "worktree", "add", "-q", "-b", "feature", wt, "main")

	// Committed work on the branch: a.txt gets a line, c.txt is new.
	write(t, wt, "a.txt", "1\n2\n3\n4\n")
	write(t, wt, "c.txt", "c1\nc2\n")
	run(t, wt, "add", "-A")
	run(t, wt, "commit", "-q", "-m", "feature work")
	// Uncommitted work: b.txt deleted, an untracked file, a staged edit.
	remove(t, wt, "b.txt")
	write(t, wt, "untracked.txt", "u\n")
	write(t, wt, "c.txt", "c1\nc2\nc3\n")
	run(t, wt, "add", "c.txt")
	// main moves on; that is not the branch's work.
	write(t, dir, "main-only.txt", "m\n")
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-q", "-m", "main moves on")

	before := stateOf(t, wt)
	r := open(t, dir)
	want := Stats{Files: 4, Additions: 1 + 3 + 1, Deletions: 1}
	s, err := r.BranchChanges(ctx, wt, "main")
	if err != nil {
		t.Fatal(err)
	}
	if s != want {
		t.Errorf("BranchChanges from the main repository = %+v, want %+v", s, want)
	}
	// The same from a Repo opened on the worktree itself.
	s, err = open(t, wt).BranchChanges(ctx, "", "main")
	if err != nil {
		t.Fatal(err)
	}
	if s != want {
		t.Errorf("BranchChanges from the worktree = %+v, want %+v", s, want)
	}
	// The same to a snapshot the caller wrote.
	w := open(t, wt)
	tree, err := w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = w.BranchChangesTo(ctx, tree, "main"); err != nil || s != want {
		t.Errorf("BranchChangesTo a snapshot = %+v, %v; want %+v", s, err, want)
	}
	checkStateUnchanged(t, before, stateOf(t, wt))

	// A directory of another repository is refused.
	other := newRepo(t, nil)
	if _, err := r.BranchChanges(ctx, other, "main"); err == nil {
		t.Error("BranchChanges accepted a directory of another repository")
	}
	// A base that looks like an option is refused.
	if _, err := r.BranchChanges(ctx, wt, "--output=x"); err == nil {
		t.Error("BranchChanges accepted an option as base")
	}
}

func TestDeleteOnlyThatSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	for _, sid := range []string{"s1", "s10", "s2"} {
		for turn := range 3 {
			if _, err := r.Capture(ctx, sid, turn); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, dir, "update-ref", "refs/agents/s1/other/thing", "HEAD")
	run(t, dir, "tag", "v1")
	// Some refs packed, some loose: deletion must handle both.
	run(t, dir, "pack-refs", "--all")
	if _, err := r.Capture(ctx, "s1", 3); err != nil {
		t.Fatal(err)
	}
	before := run(t, dir, "for-each-ref", "--format=%(refname)")

	if err := r.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ref := range strings.Split(before, "\n") {
		if !strings.HasPrefix(ref, "refs/agents/s1/") {
			want = append(want, ref)
		}
	}
	if got := run(t, dir, "for-each-ref", "--format=%(refname)"); got != strings.Join(want, "\n") {
		t.Errorf("refs after Delete(s1):\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if len(want) != 3+3+2 { // s10, s2, main, v1
		t.Errorf("unexpected ref set %v", want)
	}
	if cps, err := r.Checkpoints(ctx, "s1"); err != nil || len(cps) != 0 {
		t.Errorf("Checkpoints(s1) after Delete = %v, %v", cps, err)
	}
	if err := r.Delete(ctx, "s1"); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

func TestConcurrentCaptures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f%d.txt", i%10, i)] = fmt.Sprintf("file %d\n", i)
	}
	dir := newRepo(t, files)
	const sessions, turns = 6, 4
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			// Each session its own Repo, as separate callers would.
			r, err := Open(ctx, dir)
			if err != nil {
				errs <- err
				return
			}
			sid := fmt.Sprintf("session-%d", s)
			for turn := range turns {
				if _, err := r.Capture(ctx, sid, turn); err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", sid, turn, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r := open(t, dir)
	for s := range sessions {
		sid := fmt.Sprintf("session-%d", s)
		cps, err := r.Checkpoints(ctx, sid)
		if err != nil || len(cps) != turns {
			t.Fatalf("%s: %v, %v", sid, cps, err)
		}
		for i := 1; i < turns; i++ {
			if p := run(t, dir, "rev-parse", cps[i].Commit+"^"); p != cps[i-1].Commit {
				t.Errorf("%s turn %d: parent %s, want %s", sid, i, p, cps[i-1].Commit)
			}
		}
	}
}

func TestHostileSessionIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	ids := []string{
		"--upload-pack=x", "../../x", "a b", "ü/ö", ".hidden", "x.lock", "@{1}",
		"@", "-", ".", "..", "a..b", "x.", "a/b", "a//b", "refs/heads/main",
		"HEAD", "a\nb", "a\x00b", "*", "a~1^2:c?[d]\\", strings.Repeat("long", 100),
	}
	seen := map[string]string{}
	for _, id := range ids {
		prefix := RefPrefix(id)
		if other, dup := seen[prefix]; dup {
			t.Errorf("ids %q and %q share the prefix %q", id, other, prefix)
		}
		seen[prefix] = id
		comp, ok := strings.CutPrefix(strings.TrimSuffix(prefix, "/checkpoints/"), "refs/agents/")
		if !ok || comp == "" || strings.Contains(comp, "/") {
			t.Errorf("%q: prefix %q is not one component under refs/agents/", id, prefix)
			continue
		}
		for turn := range 2 {
			write(t, dir, "a.txt", fmt.Sprintf("%q %d\n", id, turn))
			if _, err := r.Capture(ctx, id, turn); err != nil {
				t.Fatalf("Capture(%q): %v", id, err)
			}
		}
		ref := prefix + "turn/1"
		if _, err := runErr(dir, "check-ref-format", ref); err != nil {
			t.Errorf("%q: git rejects %q: %v", id, ref, err)
		}
		if s, err := r.SessionChanges(ctx, id); err != nil || s.Files != 1 {
			t.Errorf("SessionChanges(%q) = %+v, %v", id, s, err)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Errorf("Delete(%q): %v", id, err)
		}
	}
	// Nothing escaped the namespace and nothing else was written.
	if got := run(t, dir, "for-each-ref", "--format=%(refname)"); got != "refs/heads/main" {
		t.Errorf("refs left behind:\n%s", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".git" && e.Name() != "a.txt" {
			t.Errorf("unexpected file %s", e.Name())
		}
	}
	if _, err := r.Capture(ctx, "", 0); err == nil {
		t.Error("Capture accepted an empty session id")
	}
	if _, err := r.Capture(ctx, "s", -1); err == nil {
		t.Error("Capture accepted a negative turn")
	}
}

func TestNotRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain := t.TempDir()
	if _, err := Open(ctx, plain); !errors.Is(err, ErrNotRepository) {
		t.Errorf("Open(plain folder) = %v, want ErrNotRepository", err)
	}
	dir := newRepo(t, nil)
	if _, err := Open(ctx, filepath.Join(dir, ".git")); !errors.Is(err, ErrNotRepository) {
		t.Errorf("Open(.git) = %v, want ErrNotRepository", err)
	}
	bare := filepath.Join(t.TempDir(), "bare.git")
	run(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	if _, err := Open(ctx, bare); !errors.Is(err, ErrNotRepository) {
		t.Errorf("Open(bare) = %v, want ErrNotRepository", err)
	}
	_, err := Open(ctx, filepath.Join(plain, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotRepository) {
		t.Errorf("Open(missing) = %v, want a not-exist error", err)
	}
}

func TestWorktreeConfigExtension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	run(t, dir, "config", "core.repositoryformatversion", "1")
	run(t, dir, "config", "extensions.worktreeConfig", "true")
	run(t, dir, "config", "--worktree", "core.sparseCheckout", "false")
	wt := filepath.Join(filepath.Dir(dir), "wt")
	run(t, dir, "worktree", "add", "-q", "-b", "feature", wt)

	r := open(t, dir)
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "a\nb\n")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != (Stats{1, 1, 0}) {
		t.Errorf("SessionChanges = %+v, %v", s, err)
	}
	write(t, wt, "w.txt", "w\n")
	if s, err := r.BranchChanges(ctx, wt, "main"); err != nil || s != (Stats{1, 1, 0}) {
		t.Errorf("BranchChanges = %+v, %v", s, err)
	}
}

// TestIgnoresSigningAndEnvironment checks that a checkpoint needs nothing
// from the user's configuration or the daemon's environment: commit signing
// is on with a signer that always fails, and GIT_DIR and GIT_INDEX_FILE
// point elsewhere.
func TestIgnoresSigningAndEnvironment(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	run(t, dir, "config", "commit.gpgSign", "true")
	run(t, dir, "config", "gpg.program", "false")
	elsewhere := t.TempDir()
	t.Setenv("GIT_DIR", filepath.Join(elsewhere, "git"))
	t.Setenv("GIT_WORK_TREE", elsewhere)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(elsewhere, "index"))
	t.Setenv("GIT_AUTHOR_NAME", "")

	r := open(t, dir)
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("git wrote into the directory the environment pointed at: %v", entries)
	}
}

func TestCaptureEmptyRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "repo")
	run(t, filepath.Dir(dir), "init", "-q", dir)
	r := open(t, dir)
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "first.txt", "1\n")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != (Stats{1, 1, 0}) {
		t.Errorf("SessionChanges = %+v, %v", s, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "index")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("capture created the user's index: %v", err)
	}
}

func TestDiffRejectsOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	out := filepath.Join(t.TempDir(), "out")
	for _, rev := range []string{"--output=" + out, "", "-p"} {
		if _, err := r.Diff(ctx, rev, "HEAD"); err == nil {
			t.Errorf("Diff(%q, HEAD) succeeded", rev)
		}
		if _, err := r.Diff(ctx, "HEAD", rev); err == nil {
			t.Errorf("Diff(HEAD, %q) succeeded", rev)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an option reached git")
	}
	_, err := r.Diff(ctx, "HEAD", "no-such-rev")
	var ge *GitError
	if !errors.As(err, &ge) || ge.Stderr == "" {
		t.Errorf("Diff with an unknown revision = %v, want a GitError with git's stderr", err)
	}
}

func TestCancelledCapture(t *testing.T) {
	t.Parallel()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Capture(ctx, "s", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Capture with a cancelled context = %v", err)
	}
	if got := run(t, dir, "for-each-ref", "refs/agents"); got != "" {
		t.Errorf("refs after a cancelled capture: %s", got)
	}
}

// TestExcluding checks excluded paths stay out of captures and counts: a
// link to a folder of another checkout is not the session's work.
func TestExcluding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n", ".gitignore": "deps/\n"})
	other := t.TempDir()
	if err := os.Symlink(other, filepath.Join(dir, "deps")); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir).Excluding([]string{"deps", "../escape", "/abs", ""})
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.txt", "b\n")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if s, err := r.SessionChanges(ctx, "s"); err != nil || s != (Stats{Files: 1, Additions: 1}) {
		t.Errorf("changes with the link excluded: %+v %v", s, err)
	}
	if _, ok := treeOf(t, dir, "refs/agents/s/checkpoints/turn/1")["deps"]; ok {
		t.Error("the link is in the checkpoint")
	}
	// Without the exclusion git sees the link as a new file.
	if _, err := open(t, dir).Capture(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := treeOf(t, dir, "refs/agents/t/checkpoints/turn/0")["deps"]; !ok {
		t.Error("the control capture has no link: the test shows nothing")
	}
}

// TestRecordLaterSnapshot records a tree snapshotted before the working
// tree moved on: the checkpoint is the tree as it was, with the session's
// previous checkpoint as its parent, and the user's state is untouched.
func TestRecordLaterSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	c0, err := r.Capture(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.txt", "b\n")
	before := stateOf(t, dir)
	tree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "c.txt", "after the snapshot\n")
	c1, err := r.Record(ctx, "s1", 1, tree)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := treeOf(t, dir, c1), map[string]string{"a.txt": "a", "b.txt": "b"}; !maps.Equal(got, want) {
		t.Errorf("turn 1 = %v, want %v", got, want)
	}
	if got := run(t, dir, "rev-parse", c1+"^"); got != c0 {
		t.Errorf("turn 1's parent is %s, want turn 0 (%s)", got, c0)
	}
	remove(t, dir, "c.txt")
	checkStateUnchanged(t, before, stateOf(t, dir))
	if _, err := r.Record(ctx, "s1", 2, "--help"); err == nil {
		t.Error("recorded a tree id that is an option")
	}

	// The parent given, as a caller that recorded it knows it.
	c2, err := r.RecordAfter(ctx, "s1", 2, tree, c1)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", c2+"^"); got != c1 {
		t.Errorf("turn 2's parent is %s, want turn 1 (%s)", got, c1)
	}
	if cps, err := r.Checkpoints(ctx, "s1"); err != nil || len(cps) != 3 || cps[2].Commit != c2 {
		t.Errorf("checkpoints %+v, %v", cps, err)
	}
	if _, err := r.RecordAfter(ctx, "s1", 3, tree, "-p"); err == nil {
		t.Error("recorded after a parent that is an option")
	}
}
