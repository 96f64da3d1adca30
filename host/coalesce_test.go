package host_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/protocol"
)

// holdGit takes every git slot of the host (the checkpoints package's,
// shared by every host of the process), so that no capture can start
// until the returned function gives them back. Other tests' git waits
// meanwhile.
func holdGit(t *testing.T) (release func()) {
	t.Helper()
	var rels []func()
	for range checkpoints.Processes() {
		_, r, err := checkpoints.Acquire(t.Context(), checkpoints.At(checkpoints.Now))
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, r)
	}
	release = sync.OnceFunc(func() {
		for _, r := range rels {
			r()
		}
	})
	t.Cleanup(release)
	return release
}

// backlogGit queues enough waiters behind the held slots that git is
// behind (checkpoints.Backlogged); each gives its slot back as it gets it.
func backlogGit(t *testing.T) {
	t.Helper()
	for range 4*checkpoints.Processes() + 1 {
		go func() {
			if _, r, err := checkpoints.Acquire(context.Background(), checkpoints.At(checkpoints.Later)); err == nil {
				r()
			}
		}()
	}
	for !checkpoints.Backlogged() {
		runtime.Gosched()
	}
}

// settle waits for the session's checkpoints and record.
func settle(t *testing.T, th *testHost, session string) {
	t.Helper()
	if err := th.h.Settle(t.Context(), session); err != nil {
		t.Fatal(err)
	}
}

// TestCapturesFoldWhenGitIsBehind: with git behind, a session alone in
// its folder starts its next turn without waiting for the last turn's
// capture to start; that capture then records what both turns left, as
// one checkpoint, and the counts hold both.
func TestCapturesFoldWhenGitIsBehind(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := folderSession(t, c, "fold", repo)
	send(t, c, chat, "t0", "say hello") // turn/0 and turn/1
	settle(t, th, session)

	release := holdGit(t)
	backlogGit(t)
	send(t, c, chat, "t1", "write first.txt one")
	// The capture of t1 waits for git; t2 does not wait for it.
	send(t, c, chat, "t2", "write second.txt two")
	release()
	c.WaitState(session, "the counts of both turns", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 2
	})
	settle(t, th, session)
	ref := "refs/agents/fold/checkpoints/turn/"
	if files := git(t, repo, "ls-tree", "--name-only", ref+"2"); !strings.Contains(files, "first.txt") || !strings.Contains(files, "second.txt") {
		t.Errorf("turn/2 holds %q: want both turns' files", files)
	}
	if refs := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/fold/"); strings.Contains(refs, "turn/3") || strings.Contains(refs, "start/") {
		t.Errorf("refs %q: the folded turn has a checkpoint of its own, or a start", refs)
	}
	if got, want := git(t, repo, "rev-parse", ref+"2^"), git(t, repo, "rev-parse", ref+"1"); got != want {
		t.Errorf("turn/2 follows %s, not turn/1 (%s)", got, want)
	}
}

// TestSecondSessionInFolder: a session alone in its folder takes no
// snapshot as its turns start; once a second session works there, what
// the second writes between the first's turns is left out of the
// first's counts again: its next turn's start is written down.
func TestSecondSessionInFolder(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo := newRepo(t)
	first, firstChat := folderSession(t, c, "first", repo)
	send(t, c, firstChat, "t1", "write a.txt one")
	send(t, c, firstChat, "t2", "write b.txt two")
	settle(t, th, first)
	if refs := git(t, repo, "for-each-ref", "--format=%(refname)", "refs/agents/first/"); strings.Contains(refs, "start/") {
		t.Errorf("a session alone in its folder recorded a start: %q", refs)
	}

	second, secondChat := folderSession(t, c, "second", repo)
	send(t, c, secondChat, "t1", "write theirs.txt not the first's")
	send(t, c, firstChat, "t3", "write c.txt three")
	for s, want := range map[string]int64{first: 3, second: 1} {
		settle(t, th, s)
		// Counted once: a count of the second's file would come after.
		c.WaitState(s, "its counts", func(st protocol.ChannelState) bool {
			f, _, _ := changes(t, st.(*protocol.SessionState))
			return f == want
		})
	}
	if f, _, _ := changes(t, c.State(first).(*protocol.SessionState)); f != 3 {
		t.Errorf("the first counts %d files: want a, b and c.txt, not the second's", f)
	}
	start := "refs/agents/first/checkpoints/start/3"
	if got, want := git(t, repo, "rev-parse", "refs/agents/first/checkpoints/turn/3^"), git(t, repo, "rev-parse", start); got != want {
		t.Errorf("the first's turn 3 follows %s, not its start %s", got, want)
	}
	if files := git(t, repo, "ls-tree", "--name-only", start); !strings.Contains(files, "theirs.txt") {
		t.Errorf("the first's start/3 holds %q: want the second's file", files)
	}
}

// TestRestartWithCapturesPending stops a host while a turn's capture
// waits for git: nothing is half written (no ref, no lock left behind),
// and after the restart the next turn's checkpoint covers the turn that
// got none, its counts holding both turns' files.
func TestRestartWithCapturesPending(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	th := startHost(t, state)
	c := th.client("c1")
	repo := newRepo(t)
	session, chat := folderSession(t, c, "pending", repo)
	send(t, c, chat, "t0", "say hello") // turn/0 and turn/1
	settle(t, th, session)

	release := holdGit(t)
	send(t, c, chat, "t1", "write first.txt one")
	// Close with no grace: the capture still waiting is given up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := th.h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	th.srv.Close()
	th.h = nil
	release()
	c.Close()
	prefix := "refs/agents/pending/checkpoints/"
	if refs := git(t, repo, "for-each-ref", "--format=%(refname)", prefix); refs != prefix+"turn/0\n"+prefix+"turn/1" {
		t.Errorf("refs after the stop: %q", refs)
	}
	locks, err := filepath.Glob(filepath.Join(repo, ".git", "refs", "agents", "pending", "checkpoints", "*", "*.lock"))
	if err != nil || len(locks) > 0 {
		t.Errorf("locks left behind: %v %v", locks, err)
	}

	th = startHost(t, state)
	c = th.client("c2")
	c.Subscribe(session)
	c.Subscribe(chat)
	send(t, c, chat, "t2", "write second.txt two")
	settle(t, th, session)
	if files := git(t, repo, "ls-tree", "--name-only", prefix+"turn/2"); !strings.Contains(files, "first.txt") || !strings.Contains(files, "second.txt") {
		t.Errorf("turn/2 holds %q: want both turns' files", files)
	}
	c.WaitState(session, "both turns' files counted", func(st protocol.ChannelState) bool {
		f, _, _ := changes(t, st.(*protocol.SessionState))
		return f == 2
	})
	if _, err := os.Stat(filepath.Join(repo, "first.txt")); err != nil {
		t.Fatal(err)
	}
}
