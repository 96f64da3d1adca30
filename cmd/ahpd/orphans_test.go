package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// gitIn runs git in dir with an identity and config of its own and returns
// its trimmed output, failing the test on an error.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// crashHook is a git hook that kills the daemon whose pid is victim the
// first time cond (shell, reading the hook's arguments and stdin) holds,
// together with every git between the hook and the daemon when withGit is
// set, as SIGKILL of the daemon's whole process group (systemd's stop, the
// OOM killer of a container) would. It takes itself away first, so the
// daemon started again on the same repository is not killed too.
func crashHook(victim int, cond string, withGit bool) string {
	walk := fmt.Sprintf("pids=%d", victim)
	if withGit {
		// Every ancestor of the hook up to the daemon, which must be one:
		// a hook run by anything else kills nothing.
		walk = fmt.Sprintf(`pids=
p=$PPID
while [ "$p" != %d ]; do
	[ "$p" -gt 1 ] || exit 0
	pids="$pids $p"
	p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2)
done
pids="$pids %d"`, victim, victim)
	}
	return fmt.Sprintf("#!/bin/sh\n%s\nrm -f \"$0\"\n%s\nkill -9 $pids\n", cond, walk)
}

// TestWorktreeCrashLeavesNothing kills the daemon while the first send of
// a worktree session makes its tree, at the points a crash leaves
// different things behind, then starts it again on the same state: what
// the crash left is taken away at start, before anybody asks, and the
// next send makes the session's tree under its own name, so that the
// repository ends with the one tree and the one branch the session's
// record holds.
func TestWorktreeCrashLeavesNothing(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the crash hooks find the daemon's git through /proc")
	}
	const id = "crashy"
	for _, tc := range []struct {
		name, hook, cond string
		withGit          bool
	}{
		// git made the branch (its own "git branch") and nothing else yet:
		// the reserved folder is empty and no tree is registered.
		{"branch made", "reference-transaction",
			`[ "$1" = committed ] && grep -q ' refs/heads/` + id + `$' || exit 0`, true},
		// git registered the tree, locked "initializing", and checked
		// its files out; it is moving the tree's HEAD when it dies.
		{"checking out", "reference-transaction",
			`[ "$1" = prepared ] && [ -f .git ] && grep -q ' refs/heads/` + id + `$' || exit 0`, true},
		// git finished and goes on alone: the tree is whole, and only
		// the record of it is missing.
		{"tree made", "post-checkout", `[ -f .git ] || exit 0`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			repo := e.work
			gitIn(t, repo, "init", "-q")
			if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gitIn(t, repo, "add", "README")
			gitIn(t, repo, "commit", "-q", "-m", "start")
			loc := repo + ".worktrees"
			tree := filepath.Join(loc, id)

			p := serveDaemon(t, e, "--without-connection-token")
			hook := filepath.Join(repo, ".git", "hooks", tc.hook)
			if err := os.WriteFile(hook, []byte(crashHook(p.cmd.Process.Pid, tc.cond, tc.withGit)), 0o755); err != nil {
				t.Fatal(err)
			}
			c := connect(t, p, "", "c1")
			session := "ahp-session:/" + id
			c.MustCall("createSession", map[string]any{
				"channel": session, "provider": "script", "workingDirectories": []string{"file://" + repo},
				"config": map[string]any{"isolation": "worktree"},
			})
			chat := protocol.DefaultChatURI(session)
			startTurn(c, chat, "t1", "say hi")
			if !p.exitedWithin(startTimeout) {
				t.Fatalf("the hook did not kill ahpd; stderr:\n%s", p.stderr.String())
			}
			c.Close()
			if _, err := os.Stat(hook); err == nil {
				t.Fatal("the hook never ran")
			}
			if tc.withGit {
				// The daemon's git died with it: what git made is as
				// the crash left it.
				if got := gitIn(t, repo, "branch", "--list", id); got == "" {
					t.Fatalf("the crash left no branch %s to clean up", id)
				}
			} else if branch := gitIn(t, repo, "branch", "--list", id); branch == "" {
				t.Fatalf("git did not finish the tree after the daemon died")
			}

			// Started again, the daemon takes what the crash left away
			// without being asked, once the git it started has ended.
			waitClaimsFree(t, loc)
			p = serveDaemon(t, e, "--without-connection-token")
			p.waitStderr("took away what an unfinished worktree creation left", startTimeout)
			assertTrees(t, repo, nil)
			// The sweep logs once the tree and the branch are gone; the
			// claim and the folder of trees go after (a loaded machine
			// has been seen between the two).
			for deadline := time.Now().Add(startTimeout); ; time.Sleep(10 * time.Millisecond) {
				entries, err := os.ReadDir(loc)
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s is left, holding %v", loc, names(entries))
					break
				}
			}

			// The session goes on: its next send makes its tree, under
			// its own name rather than a second one.
			c = connect(t, p, "", "c2")
			c.Subscribe(session)
			c.Subscribe(chat)
			send(t, c, chat, "t2", "say again")
			c.WaitState(session, "the session to move into its tree", func(s protocol.ChannelState) bool {
				dirs := s.(*protocol.SessionState).WorkingDirectories
				return len(dirs) == 1 && dirs[0] == "file://"+tree
			})
			assertTrees(t, repo, []string{tree})
			if entries, err := os.ReadDir(loc); err != nil || !slices.Equal(names(entries), []string{id}) {
				t.Errorf("%s holds %v (%v), want only the tree", loc, names(entries), err)
			}
			c.Close()
			p.terminate()
		})
	}
}

// waitClaimsFree waits until nothing holds the claims in loc, the files
// that say a tree is being made: the daemon's git, which goes on alone
// once the daemon died, holds its claim until it ends.
func waitClaimsFree(t *testing.T, loc string) {
	t.Helper()
	entries, err := os.ReadDir(loc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".ahpd-pending") {
			continue
		}
		f, err := os.Open(filepath.Join(loc, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		locked := make(chan error, 1)
		go func() { locked <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
		select {
		case err = <-locked:
		case <-time.After(startTimeout):
			t.Fatalf("%s is still held %v after the daemon died", e.Name(), startTimeout)
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// assertTrees checks that repo's linked trees are trees, each on the
// branch named after its folder, and that no other branch than main is
// left.
func assertTrees(t *testing.T, repo string, trees []string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(gitIn(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if path, ok := strings.CutPrefix(l, "worktree "); ok && path != repo {
			got = append(got, path)
		}
	}
	if !slices.Equal(got, trees) {
		t.Errorf("linked trees %q, want %q", got, trees)
	}
	want := []string{"main"}
	for _, tr := range trees {
		want = append(want, filepath.Base(tr))
	}
	slices.Sort(want)
	if branches := strings.Fields(gitIn(t, repo, "branch", "--format=%(refname:short)")); !slices.Equal(branches, want) {
		t.Errorf("branches %q, want %q", branches, want)
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
