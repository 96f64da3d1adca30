package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeClaim writes, as a Create that crashed before its tree was settled
// leaves it, the claim of the tree at path: the worktree package's file
// beside the tree's folder, which no process holds open.
func writeClaim(t *testing.T, repo, path, branch, owner string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"repo": repo, "common": filepath.Join(repo, ".git"), "path": path, "branch": branch,
		"base": git(t, repo, "rev-parse", "main"), "owner": owner,
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".ahpd-pending")
	if err := os.WriteFile(claim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return claim
}

// TestWorktreeClaimsAfterRestart starts a host on what crashes left of
// two trees in a repository: one a session's record holds (the crash came
// between the record and the settling) and one no record holds (the crash
// came before the record). The next tree made in the repository sweeps
// first: the recorded tree stays, settled; the other goes with its branch.
func TestWorktreeClaimsAfterRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	repo := newRepo(t)
	_, chat := worktreeSession(t, c, "wt1", repo, nil)
	send(t, c, chat, "t1", "say hi")
	loc := filepath.Join(filepath.Dir(repo), "project.worktrees")
	recorded := filepath.Join(loc, "wt1")
	c.Close()
	th.stop()

	lost := filepath.Join(loc, "ghost")
	git(t, repo, "worktree", "add", "-q", "-b", "ghost", "--", lost, "main")
	claims := []string{writeClaim(t, repo, recorded, "wt1", state), writeClaim(t, repo, lost, "ghost", state)}

	th = startHost(t, state)
	c = th.client("c2")
	_, chat = worktreeSession(t, c, "wt2", repo, nil)
	send(t, c, chat, "t1", "say hi")
	for _, claim := range claims {
		if _, err := os.Stat(claim); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", claim, err)
		}
	}
	var trees []string
	for _, l := range strings.Split(git(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if path, ok := strings.CutPrefix(l, "worktree "); ok && path != repo {
			trees = append(trees, path)
		}
	}
	slices.Sort(trees)
	if want := []string{recorded, filepath.Join(loc, "wt2")}; !slices.Equal(trees, want) {
		t.Errorf("trees %q, want %q", trees, want)
	}
	if branches := strings.Fields(git(t, repo, "branch", "--format=%(refname:short)")); !slices.Equal(branches, []string{"main", "wt1", "wt2"}) {
		t.Errorf("branches %q", branches)
	}
}
