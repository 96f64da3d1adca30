package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// gatedRepo makes a repository in which git holds the ref of a session's
// turn/1 checkpoint until the test opens the gate: its
// reference-transaction hook, which git runs as the ref is written, first
// takes a lock the test holds. The tree is written down by then; only
// the commit's ref, and the counts read after it, wait.
func gatedRepo(t *testing.T) (repo string, open func()) {
	t.Helper()
	repo = newRepo(t)
	gate, err := os.Create(filepath.Join(t.TempDir(), "gate"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(gate.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	open = sync.OnceFunc(func() { gate.Close() }) // the lock goes with the file
	t.Cleanup(open)
	hook := "#!/bin/sh\nrefs=$(cat)\n" +
		"case \"$1 $refs\" in prepared*checkpoints/turn/1) flock -s '" + gate.Name() + "' true ;; esac\n"
	if err := os.WriteFile(filepath.Join(repo, ".git", "hooks", "reference-transaction"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	return repo, open
}

// folderSession makes a folder session in dir, with c subscribed to it
// and its default chat.
func folderSession(t *testing.T, c *hosttest.Client, id, dir string) (session, chat string) {
	t.Helper()
	session = "ahp-session:/" + id
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + dir}, "config": map[string]any{"autoApprove": "allow"}})
	c.Subscribe(session)
	chat = protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	return session, chat
}

// TestTurnEndsBeforeItsCapture holds a turn's checkpoint in git: the
// turn's end is published all the same, and so is the end of the next
// turn, which needs only the tree the first left written down; the counts
// come when the captures are done, and turn/1 holds none of the second
// turn's work.
func TestTurnEndsBeforeItsCapture(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo, open := gatedRepo(t)
	session, chat := folderSession(t, c, "gated", repo)

	// send waits for each turn's end, which a capture holding the turn
	// would never let come.
	send(t, c, chat, "t1", "write first.txt one")
	send(t, c, chat, "t2", "write second.txt two")
	if f, _, _ := changes(t, c.State(session).(*protocol.SessionState)); f != -1 {
		t.Fatalf("counts of %d files before a capture could end", f)
	}
	open()
	c.WaitState(session, "the counts of both turns", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 2
	})
	ref := "refs/agents/gated/checkpoints/turn/"
	if files := git(t, repo, "ls-tree", "--name-only", ref+"1"); !strings.Contains(files, "first.txt") || strings.Contains(files, "second.txt") {
		t.Errorf("turn/1 holds %q: want first.txt and not the next turn's second.txt", files)
	}
	if files := git(t, repo, "ls-tree", "--name-only", ref+"2"); !strings.Contains(files, "second.txt") {
		t.Errorf("turn/2 holds %q", files)
	}
}

// TestCloseWaitsForCaptures closes the host while a turn's checkpoint is
// held in git: Close lets it finish rather than cut it off.
func TestCloseWaitsForCaptures(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	repo, open := gatedRepo(t)
	_, chat := folderSession(t, c, "closing", repo)
	send(t, c, chat, "t1", "write first.txt one")

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		closed <- th.h.Close(ctx)
	}()
	// The host refuses new sessions once it is closing.
	for {
		_, err := c.Call("createSession", map[string]any{"channel": "ahp-session:/late", "provider": "script",
			"workingDirectories": []string{"file://" + th.work}})
		if err != nil && strings.Contains(err.Message, "shutting down") {
			break
		}
		if err == nil {
			c.MustCall("disposeSession", map[string]any{"channel": "ahp-session:/late"})
		}
	}
	open()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if files := git(t, repo, "ls-tree", "--name-only", "refs/agents/closing/checkpoints/turn/1"); !strings.Contains(files, "first.txt") {
		t.Errorf("turn/1 holds %q after Close", files)
	}
}
