package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCreateDefaultLocation(t *testing.T) {
	repo := newRepo(t, "")
	sub := filepath.Join(repo, "sub")
	writeFile(t, filepath.Join(sub, "f"), "x", 0o644)
	m := NewManager("", nil)

	tr := create(t, m, Spec{Dir: sub, Name: "s1"})
	if want := repo + ".worktrees/s1"; tr.Path != want {
		t.Errorf("Path = %s, want %s", tr.Path, want)
	}
	if tr.Repo != repo || tr.Branch != "s1" {
		t.Errorf("Repo, Branch = %s, %s; want %s, s1", tr.Repo, tr.Branch, repo)
	}
	if head := gitT(t, repo, "rev-parse", "main"); tr.Base != head {
		t.Errorf("Base = %s, want %s", tr.Base, head)
	}
	if got := readFile(t, filepath.Join(tr.Path, "README")); got != "hello\n" {
		t.Errorf("README in tree = %q", got)
	}
	if got := gitT(t, tr.Path, "branch", "--show-current"); got != "s1" {
		t.Errorf("tree checks out %q", got)
	}
	if loc, err := m.Location(context.Background(), sub); err != nil || loc != repo+".worktrees" {
		t.Errorf("Location = %q, %v", loc, err)
	}

	// A session started inside a tree puts its tree beside that one.
	tr2 := create(t, m, Spec{Dir: tr.Path, Name: "s2"})
	if want := repo + ".worktrees/s2"; tr2.Path != want {
		t.Errorf("tree from a tree: Path = %s, want %s", tr2.Path, want)
	}
}

func TestCreateUnderRoot(t *testing.T) {
	repo := newRepo(t, "")
	root := t.TempDir()
	m := NewManager(root, nil)
	tr := create(t, m, Spec{Dir: repo, Name: "s1", BranchPrefix: "agents/"})
	if want := filepath.Join(root, "repo", "s1"); tr.Path != want {
		t.Errorf("Path = %s, want %s", tr.Path, want)
	}
	if tr.Branch != "agents/s1" {
		t.Errorf("Branch = %q, want agents/s1", tr.Branch)
	}
	if got := gitT(t, tr.Path, "branch", "--show-current"); got != "agents/s1" {
		t.Errorf("tree checks out %q", got)
	}
	if exists(repo + ".worktrees") {
		t.Error("default location made although a root is set")
	}
	if kept, why, err := m.Remove(context.Background(), tr); err != nil || kept {
		t.Fatalf("Remove = %v, %q, %v", kept, why, err)
	}
	if exists(filepath.Join(root, "repo")) || !exists(root) {
		t.Error("Remove should take the empty repository folder away and keep the root")
	}
}

func TestCheckoutBranch(t *testing.T) {
	repo := newRepo(t, "")
	gitT(t, repo, "branch", "feature")
	m := NewManager("", nil)

	tr := create(t, m, Spec{Dir: repo, Name: "s1", Branch: "feature", CheckoutBranch: true})
	if tr.Branch != "feature" {
		t.Errorf("Branch = %q, want feature", tr.Branch)
	}
	if exitOK(repo, "rev-parse", "--verify", "--quiet", "refs/heads/s1") {
		t.Error("a branch was made although CheckoutBranch is set")
	}

	// main is checked out in the repository itself: git says no, and why.
	_, err := m.Create(context.Background(), Spec{Dir: repo, Name: "s2", Branch: "main", CheckoutBranch: true})
	if err == nil || !strings.Contains(err.Error(), "already checked out") {
		t.Errorf("checking out main twice: err = %v, want git's reason", err)
	}
	if exists(filepath.Join(repo+".worktrees", "s2")) {
		t.Error("the failed tree's folder was left behind")
	}
}

func exitOK(dir string, args ...string) bool {
	_, err := gitE(dir, args...)
	return err == nil
}

func TestTrack(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)

	untracked := create(t, m, Spec{Dir: repo, Name: "no"})
	if exitOK(repo, "config", "branch."+untracked.Branch+".merge") {
		t.Error("Track=false: the branch has an upstream")
	}
	tracked := create(t, m, Spec{Dir: repo, Name: "yes", Track: true})
	if got := gitT(t, repo, "config", "branch."+tracked.Branch+".merge"); got != "refs/heads/main" {
		t.Errorf("Track=true from local main: merge = %q", got)
	}

	// In a clone, main's upstream is origin/main: the new branch takes it.
	clone := newClone(t)
	gitT(t, clone, "branch", "--track", "feature", "origin/feature")
	fromMain := create(t, m, Spec{Dir: clone, Name: "c1", Track: true})
	if r, mg := gitT(t, clone, "config", "branch."+fromMain.Branch+".remote"), gitT(t, clone, "config", "branch."+fromMain.Branch+".merge"); r != "origin" || mg != "refs/heads/main" {
		t.Errorf("Track=true from main in a clone: upstream = %s %s, want origin refs/heads/main", r, mg)
	}
	fromRemote := create(t, m, Spec{Dir: clone, Name: "c2", Branch: "origin/feature", Track: true})
	if r, mg := gitT(t, clone, "config", "branch."+fromRemote.Branch+".remote"), gitT(t, clone, "config", "branch."+fromRemote.Branch+".merge"); r != "origin" || mg != "refs/heads/feature" {
		t.Errorf("Track=true from origin/feature: upstream = %s %s", r, mg)
	}
	noTrack := create(t, m, Spec{Dir: clone, Name: "c3"})
	if exitOK(clone, "config", "branch."+noTrack.Branch+".merge") {
		t.Error("Track=false in a clone: the branch has an upstream")
	}
}

// newClone makes a bare "origin" with main and feature, and returns a
// clone of it (which has refs/remotes/origin/HEAD -> origin/main).
func newClone(tb testing.TB) string {
	tb.Helper()
	work := newRepo(tb, "")
	gitT(tb, work, "branch", "feature")
	origin := filepath.Join(tb.TempDir(), "origin.git")
	gitT(tb, filepath.Dir(origin), "init", "-q", "--bare", origin)
	gitT(tb, work, "push", "-q", origin, "main", "feature")
	clone := filepath.Join(tb.TempDir(), "clone")
	gitT(tb, filepath.Dir(clone), "clone", "-q", origin, clone)
	return clone
}

func TestCreateBadBase(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	_, err := m.Create(context.Background(), Spec{Dir: repo, Name: "s1", Branch: "nope"})
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v, want a *GitError", err)
	}
	if !strings.Contains(err.Error(), "nope") || !strings.Contains(ge.Stderr, "fatal:") {
		t.Errorf("err = %q, want git's reason naming the base", err)
	}
	if exists(filepath.Join(repo+".worktrees", "s1")) {
		t.Error("the failed tree's folder was left behind")
	}
	if exitOK(repo, "rev-parse", "--verify", "--quiet", "refs/heads/s1") {
		t.Error("the failed tree's branch was left behind")
	}
}

func TestNameCollision(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	// The folder is taken by someone else.
	if err := os.MkdirAll(filepath.Join(repo+".worktrees", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr := create(t, m, Spec{Dir: repo, Name: "s1"})
	if filepath.Base(tr.Path) != "s1-2" || tr.Branch != "s1-2" {
		t.Errorf("folder taken: Path, Branch = %s, %s; want s1-2", tr.Path, tr.Branch)
	}
	// The branch is taken.
	gitT(t, repo, "branch", "p/s2")
	tr = create(t, m, Spec{Dir: repo, Name: "s2", BranchPrefix: "p/"})
	if filepath.Base(tr.Path) != "s2-2" || tr.Branch != "p/s2-2" {
		t.Errorf("branch taken: Path, Branch = %s, %s; want s2-2, p/s2-2", tr.Path, tr.Branch)
	}
	// The same name again.
	tr = create(t, m, Spec{Dir: repo, Name: "s2", BranchPrefix: "p/"})
	if filepath.Base(tr.Path) != "s2-3" {
		t.Errorf("same name again: Path = %s, want s2-3", tr.Path)
	}
}

func TestConcurrentCreate(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	const n = 6
	var wg sync.WaitGroup
	trees := make([]*Tree, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half share a name, and all set an upstream, which writes the
			// repository's config: without the lock git trips on its locks.
			name := fmt.Sprintf("s%d", i)
			if i%2 == 0 {
				name = "same"
			}
			trees[i], errs[i] = m.Create(context.Background(), Spec{Dir: repo, Name: name, Track: true})
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Create %d: %v", i, errs[i])
		}
		if seen[trees[i].Path] {
			t.Errorf("two trees at %s", trees[i].Path)
		}
		seen[trees[i].Path] = true
	}
	if len(m.locks) != 0 {
		t.Errorf("%d repository locks left in the map", len(m.locks))
	}
}

func TestRemoveClean(t *testing.T) {
	repo := newRepo(t, "node_modules/\ncache\n.env\n")
	writeFile(t, filepath.Join(repo, "node_modules", "pkg", "index.js"), "js", 0o644)
	writeFile(t, filepath.Join(repo, "cache", "blob"), "c", 0o644)
	writeFile(t, filepath.Join(repo, ".env"), "SECRET=1", 0o600)
	m := NewManager("", nil)
	tr := create(t, m, Spec{Dir: repo, Name: "s1", BranchPrefix: "agents/",
		SymlinkFolders: []string{"node_modules", "cache"}, IncludeFiles: []string{".env"}})
	// Commit something in the tree: it must survive in the branch.
	writeFile(t, filepath.Join(tr.Path, "new.txt"), "work", 0o644)
	gitT(t, tr.Path, "add", "new.txt")
	gitT(t, tr.Path, "commit", "-q", "-m", "work")

	kept, why, err := m.Remove(context.Background(), tr)
	if err != nil || kept {
		t.Fatalf("Remove = %v, %q, %v; want removed", kept, why, err)
	}
	if exists(tr.Path) {
		t.Error("the tree is still on disk")
	}
	if exists(repo + ".worktrees") {
		t.Error("the empty location folder is still there")
	}
	if !exitOK(repo, "rev-parse", "--verify", "--quiet", "refs/heads/agents/s1") {
		t.Error("the tree's branch was deleted")
	}
	if got := gitT(t, repo, "show", "agents/s1:new.txt"); got != "work" {
		t.Errorf("committed work = %q", got)
	}
	// The linked folders are the source's own and must be untouched.
	if !exists(filepath.Join(repo, "node_modules", "pkg", "index.js")) || !exists(filepath.Join(repo, "cache", "blob")) {
		t.Error("removing the tree removed the linked folders' contents")
	}
	if out := gitT(t, repo, "worktree", "list", "--porcelain"); strings.Contains(out, tr.Path) {
		t.Errorf("git still lists the tree:\n%s", out)
	}
	// Removing it again is not an error.
	if kept, _, err := m.Remove(context.Background(), tr); err != nil || kept {
		t.Errorf("second Remove = %v, %v", kept, err)
	}
}

func TestRemoveDirty(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	ctx := context.Background()

	changed := create(t, m, Spec{Dir: repo, Name: "changed"})
	writeFile(t, filepath.Join(changed.Path, "README"), "edited\n", 0o644)
	kept, why, err := m.Remove(ctx, changed)
	if err != nil || !kept || !strings.Contains(why, "README") {
		t.Errorf("tracked change: Remove = %v, %q, %v; want kept with a reason naming README", kept, why, err)
	}
	if !exists(filepath.Join(changed.Path, "README")) {
		t.Error("a tree with uncommitted changes was removed")
	}

	untracked := create(t, m, Spec{Dir: repo, Name: "untracked"})
	writeFile(t, filepath.Join(untracked.Path, "notes.md"), "n", 0o644)
	kept, why, err = m.Remove(ctx, untracked)
	if err != nil || !kept || !strings.Contains(why, "notes.md") {
		t.Errorf("untracked file: Remove = %v, %q, %v; want kept", kept, why, err)
	}
	if !exists(filepath.Join(untracked.Path, "notes.md")) {
		t.Error("a tree with an untracked file was removed")
	}
}

func TestRemoveRefusesMainWorkTree(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	_, _, err := m.Remove(context.Background(), &Tree{Path: repo, Repo: repo})
	if err == nil {
		t.Fatal("Remove of a repository's own checkout succeeded")
	}
	if !exists(filepath.Join(repo, "README")) {
		t.Fatal("the repository was touched")
	}
}

func TestWorktrees(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	tr := create(t, m, Spec{Dir: repo, Name: "s1"})
	wts, err := Worktrees(context.Background(), tr.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(wts) != 2 || !wts[0].Main || wts[0].Path != repo || wts[0].Branch != "main" ||
		wts[1].Main || wts[1].Path != tr.Path || wts[1].Branch != "s1" || wts[1].Head != tr.Base {
		t.Errorf("Worktrees = %+v", wts)
	}
}
