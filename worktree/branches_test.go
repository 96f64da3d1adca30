package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
)

func TestReadsPlainRepository(t *testing.T) {
	repo := newRepo(t, "")
	gitT(t, repo, "branch", "Feature/Login")
	gitT(t, repo, "branch", "zeta")
	gitT(t, repo, "checkout", "-q", "zeta")
	sub := filepath.Join(repo, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, dir := range []string{repo, sub} {
		if !IsRepository(dir) {
			t.Errorf("IsRepository(%s) = false", dir)
		}
		got, err := Branches(dir)
		if want := []string{"Feature/Login", "main", "zeta"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("Branches(%s) = %q, %v; want %q", dir, got, err, want)
		}
		if cur, err := CurrentBranch(dir); err != nil || cur != "zeta" {
			t.Errorf("CurrentBranch(%s) = %q, %v", dir, cur, err)
		}
		// No remote: the default is the branch checked out.
		if def, err := DefaultBranch(dir); err != nil || def != "zeta" {
			t.Errorf("DefaultBranch(%s) = %q, %v", dir, def, err)
		}
	}
	if IsRepository(t.TempDir()) {
		t.Error("IsRepository of an empty folder = true")
	}
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitT(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	if IsRepository(bare) {
		t.Error("IsRepository of a bare repository = true; a session needs a work tree")
	}
	if _, err := Branches(t.TempDir()); err == nil {
		t.Error("Branches of an empty folder succeeded")
	}

	gitT(t, repo, "checkout", "-q", "--detach", "HEAD")
	if cur, err := CurrentBranch(repo); err != nil || cur != "" {
		t.Errorf("detached: CurrentBranch = %q, %v", cur, err)
	}
	if def, err := DefaultBranch(repo); err != nil || def != "" {
		t.Errorf("detached, no remote: DefaultBranch = %q, %v", def, err)
	}
}

func TestReadsClone(t *testing.T) {
	clone := newClone(t)
	gitT(t, clone, "checkout", "-q", "-b", "mine")
	if def, err := DefaultBranch(clone); err != nil || def != "main" {
		t.Errorf("DefaultBranch = %q, %v; want main (origin/HEAD)", def, err)
	}
	got, err := Branches(clone)
	if want := []string{"main", "mine", "origin/feature", "origin/main"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Branches = %q, %v; want %q", got, err, want)
	}
	// Without a local main the default is given so that it resolves.
	gitT(t, clone, "branch", "-D", "main")
	if def, err := DefaultBranch(clone); err != nil || def != "origin/main" {
		t.Errorf("no local main: DefaultBranch = %q, %v; want origin/main", def, err)
	}
	// A tree with no branch chosen starts from the remote's default.
	m := NewManager("", nil)
	tr := create(t, m, Spec{Dir: clone, Name: "s1"})
	if want := gitT(t, clone, "rev-parse", "origin/main"); tr.Base != want {
		t.Errorf("Base = %s, want origin/main %s", tr.Base, want)
	}
}

func TestReadsLinkedWorktree(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	tr := create(t, m, Spec{Dir: repo, Name: "s1", BranchPrefix: "agents/"})
	if !IsRepository(tr.Path) {
		t.Error("IsRepository(tree) = false")
	}
	if cur, err := CurrentBranch(tr.Path); err != nil || cur != "agents/s1" {
		t.Errorf("CurrentBranch(tree) = %q, %v", cur, err)
	}
	if got, err := Branches(tr.Path); err != nil || !slices.Equal(got, []string{"agents/s1", "main"}) {
		t.Errorf("Branches(tree) = %q, %v", got, err)
	}
	if cur, err := CurrentBranch(repo); err != nil || cur != "main" {
		t.Errorf("CurrentBranch(repo) = %q, %v", cur, err)
	}
}

// extensions.worktreeConfig makes go-git v5 refuse a repository; every read
// must still work.
func TestReadsWorktreeConfigExtension(t *testing.T) {
	clone := newClone(t)
	gitT(t, clone, "config", "core.repositoryformatversion", "1")
	gitT(t, clone, "config", "extensions.worktreeConfig", "true")
	if _, err := git.PlainOpenWithOptions(clone, &git.PlainOpenOptions{DetectDotGit: true}); err == nil {
		t.Log("go-git opened the repository itself; the wrapper is no longer needed")
	}
	m := NewManager("", nil)
	tr := create(t, m, Spec{Dir: clone, Name: "s1"})

	for _, dir := range []string{clone, tr.Path} {
		if !IsRepository(dir) {
			t.Errorf("IsRepository(%s) = false", dir)
		}
		if got, err := Branches(dir); err != nil || !slices.Contains(got, "origin/feature") {
			t.Errorf("Branches(%s) = %q, %v", dir, got, err)
		}
		if _, err := CurrentBranch(dir); err != nil {
			t.Errorf("CurrentBranch(%s): %v", dir, err)
		}
		if def, err := DefaultBranch(dir); err != nil || def != "main" {
			t.Errorf("DefaultBranch(%s) = %q, %v", dir, def, err)
		}
		if got, err := Complete(dir, "FEAT", 10); err != nil || !slices.Equal(got, []string{"origin/feature"}) {
			t.Errorf("Complete(%s) = %q, %v", dir, got, err)
		}
	}
	// The config on disk is untouched by the reads.
	if got := gitT(t, clone, "config", "extensions.worktreeConfig"); got != "true" {
		t.Errorf("extensions.worktreeConfig = %q after the reads", got)
	}
	// An extension that changes how the repository is read stays refused.
	gitT(t, clone, "config", "extensions.refStorage", "reftable")
	if IsRepository(clone) {
		t.Error("a repository with an unknown ref storage was read")
	}
}

func TestComplete(t *testing.T) {
	clone := newClone(t)
	for _, b := range []string{"fix-login", "Login-page", "zz-login", "aa"} {
		gitT(t, clone, "branch", b)
	}
	gitT(t, clone, "checkout", "-q", "zz-login")

	cases := []struct {
		query string
		limit int
		want  []string
	}{
		// Current first, then default, then local by name, then remote.
		{"", 0, []string{"zz-login", "main", "Login-page", "aa", "fix-login", "origin/feature", "origin/main"}},
		{"LOGIN", 0, []string{"zz-login", "Login-page", "fix-login"}},
		{"login", 2, []string{"zz-login", "Login-page"}},
		{"main", 0, []string{"main", "origin/main"}},
		{"nothing", 5, nil},
	}
	for _, c := range cases {
		got, err := Complete(clone, c.query, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Complete(%q, %d) = %q, %v; want %q", c.query, c.limit, got, err, c.want)
		}
	}
}

// BenchmarkComplete measures a completion over 5,000 packed branches, read
// afresh each time.
func BenchmarkComplete(b *testing.B) {
	repo := newRepo(b, "")
	head := gitT(b, repo, "rev-parse", "HEAD")
	var sb strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&sb, "create refs/heads/team-%d/feature-%05d %s\n", i%20, i, head)
	}
	gitStdin(b, repo, sb.String(), "update-ref", "--stdin")
	gitT(b, repo, "pack-refs", "--all")
	if got, err := Complete(repo, "", 0); err != nil || len(got) != 5001 {
		b.Fatalf("Complete = %d branches, %v", len(got), err)
	}

	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// "FEATURE-0123" names ten branches (feature-01230 to
		// feature-01239) whatever i is: every query the loop makes
		// matches, as a person typing a branch's name would, and the
		// match is checked so the figure cannot come from empty answers.
		q := fmt.Sprintf("FEATURE-%04d", i%500)
		got, err := Complete(repo, q, 20)
		if err != nil || len(got) != 10 {
			b.Fatalf("Complete(%q) = %q, %v; want 10 branches", q, got, err)
		}
		for _, name := range got {
			if !strings.Contains(name, strings.ToLower(q)) {
				b.Fatalf("Complete(%q) gave %q", q, name)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/completion")
}
