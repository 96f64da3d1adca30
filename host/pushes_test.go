package host_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// bareRemote makes a bare repository and adds it to repo as the remote
// "origin"; it returns its path.
func bareRemote(t *testing.T, repo string) string {
	t.Helper()
	bare := filepath.Join(t.TempDir(), "remote.git")
	git(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	git(t, repo, "remote", "add", "origin", bare)
	return bare
}

// agentRefs lists the refs under refs/agents/ that git, run in dir with
// args (for-each-ref or ls-remote), prints, as ref -> commit.
func agentRefs(t *testing.T, dir string, args ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(git(t, dir, args...), "\n") {
		commit, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			commit, ref, ok = strings.Cut(strings.TrimSpace(line), " ")
		}
		if ok && strings.HasPrefix(ref, "refs/agents/") {
			out[ref] = commit
		}
	}
	return out
}

func localRefs(t *testing.T, repo string) map[string]string {
	return agentRefs(t, repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/agents/")
}

func remoteRefs(t *testing.T, repo, remote string) map[string]string {
	return agentRefs(t, repo, "ls-remote", "--", remote)
}

// waitPushes waits, push by push, until ok holds of the pushes ended.
func waitPushes(t *testing.T, p *host.Pushes, what string, ok func([]host.PushEnd) bool) []host.PushEnd {
	t.Helper()
	deadline := time.After(hosttest.Timeout)
	for {
		ends, next := p.Ends()
		if ok(ends) {
			return ends
		}
		select {
		case <-next:
		case <-deadline:
			t.Fatalf("waiting for %s: pushes so far %+v", what, ends)
		}
	}
}

const cpPrefix = "refs/agents/cp/checkpoints/turn/"

// TestPushCheckpoints: with a remote to push to, each turn's checkpoint
// reaches the remote under the same name with the same commit, and no
// push is counted as failed.
func TestPushCheckpoints(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bare := bareRemote(t, repo)
	var pushes host.Pushes
	th := startHost(t, "", func(o *host.Options) { host.WithPushes(o, "origin", &pushes) })
	c := th.client("c1")
	_, chat := folderSession(t, c, "cp", repo)
	for i, msg := range []string{"write a.txt one", "write b.txt two"} {
		turn := []string{"t1", "t2"}[i]
		send(t, c, chat, turn, msg)
		newest := cpPrefix + []string{"1", "2"}[i]
		waitPushes(t, &pushes, "the push of "+newest, func([]host.PushEnd) bool {
			local, remote := localRefs(t, repo), remoteRefs(t, repo, bare)
			return local[newest] != "" && maps.Equal(local, remote)
		})
	}
	remote := remoteRefs(t, repo, bare)
	if len(remote) != 3 || remote[cpPrefix+"0"] == "" {
		t.Errorf("the remote has %v, want turn/0 to turn/2", remote)
	}
	if got := git(t, repo, "rev-parse", cpPrefix+"2^"); got != remote[cpPrefix+"1"] {
		t.Errorf("turn/2's parent is %s, not turn/1 (%s)", got, remote[cpPrefix+"1"])
	}
	if m := scrape(t, th); m["ahpd_checkpoint_push_errors_total"] != 0 {
		t.Errorf("ahpd_checkpoint_push_errors_total = %v", m["ahpd_checkpoint_push_errors_total"])
	}
}

// countingHandler counts the records whose message starts with prefix,
// and hands every record on.
type countingHandler struct {
	slog.Handler
	prefix string
	mu     *sync.Mutex
	n      *int
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) && r.Level >= slog.LevelWarn {
		h.mu.Lock()
		*h.n++
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

// TestPushCheckpointsFails: a remote that is no repository fails every
// push; the turns succeed all the same, each failure is counted, and the
// run of them is logged once.
func TestPushCheckpointsFails(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	nowhere := filepath.Join(t.TempDir(), "no-repository")
	if err := os.Mkdir(nowhere, 0o755); err != nil {
		t.Fatal(err)
	}
	var (
		pushes host.Pushes
		mu     sync.Mutex
		warned int
	)
	th := startHost(t, "", func(o *host.Options) {
		host.WithPushes(o, nowhere, &pushes)
		o.Logger = slog.New(countingHandler{Handler: o.Logger.Handler(), prefix: "could not push", mu: &mu, n: &warned})
	})
	c := th.client("c1")
	session, chat := folderSession(t, c, "cp", repo)
	failed := func(n int) func([]host.PushEnd) bool {
		return func(ends []host.PushEnd) bool {
			k := 0
			for _, e := range ends {
				if e.Session == session && e.Err != nil && !errors.Is(e.Err, host.ErrNoRemote) {
					k++
				}
			}
			return k >= n
		}
	}
	for i, msg := range []string{"write a.txt one", "write b.txt two"} {
		turn := []string{"t1", "t2"}[i]
		if st := send(t, c, chat, turn, msg); errorText(st.Turns[len(st.Turns)-1]) != "" {
			t.Fatalf("turn %s: %s", turn, errorText(st.Turns[len(st.Turns)-1]))
		}
		waitPushes(t, &pushes, "a failed push", failed(i+1))
	}
	if m := scrape(t, th); m["ahpd_checkpoint_push_errors_total"] < 2 {
		t.Errorf("ahpd_checkpoint_push_errors_total = %v, after two failed pushes", m["ahpd_checkpoint_push_errors_total"])
	}
	if _, err := os.Stat(filepath.Join(repo, "b.txt")); err != nil {
		t.Errorf("the second turn's file: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if warned != 1 {
		t.Errorf("%d warnings for one run of failures, want 1", warned)
	}
}

// TestPushCheckpointsNoSuchRemote: a repository without the remote named
// is skipped, not failed.
func TestPushCheckpointsNoSuchRemote(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	var pushes host.Pushes
	th := startHost(t, "", func(o *host.Options) { host.WithPushes(o, "backup", &pushes) })
	c := th.client("c1")
	session, chat := folderSession(t, c, "cp", repo)
	send(t, c, chat, "t1", "write a.txt one")
	waitPushes(t, &pushes, "a skipped push", func(ends []host.PushEnd) bool {
		for _, e := range ends {
			if e.Session == session && errors.Is(e.Err, host.ErrNoRemote) {
				return true
			}
		}
		return false
	})
	if m := scrape(t, th); m["ahpd_checkpoint_push_errors_total"] != 0 {
		t.Errorf("ahpd_checkpoint_push_errors_total = %v", m["ahpd_checkpoint_push_errors_total"])
	}
}

// TestFetchCheckpointsOnWake: a session's checkpoints pushed by one host
// are fetched by the next that wakes it in a fresh clone (the same path,
// as a shared layout of repositories has it), so its next checkpoint
// follows the ones before instead of starting a new history.
func TestFetchCheckpointsOnWake(t *testing.T) {
	t.Parallel()
	slow(t)
	repo := newRepo(t)
	bare := bareRemote(t, repo)
	git(t, repo, "push", "-q", "origin", "HEAD:refs/heads/main")
	var pushes host.Pushes
	state := t.TempDir()
	th := startHost(t, state, func(o *host.Options) { host.WithPushes(o, "origin", &pushes) })
	c := th.client("c1")
	_, chat := folderSession(t, c, "cp", repo)
	send(t, c, chat, "t1", "write a.txt one")
	send(t, c, chat, "t2", "write b.txt two")
	waitPushes(t, &pushes, "turn/2 on the remote", func([]host.PushEnd) bool {
		return remoteRefs(t, repo, bare)[cpPrefix+"2"] != ""
	})
	pushed := remoteRefs(t, repo, bare)
	c.Close()
	th.stop()

	// Another machine: a clone of the remote, without the checkpoints.
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	git(t, filepath.Dir(repo), "clone", "-q", bare, repo)
	if got := localRefs(t, repo); len(got) != 0 {
		t.Fatalf("the clone has %v", got)
	}
	var again host.Pushes
	th = startHost(t, state, func(o *host.Options) { host.WithPushes(o, "origin", &again) })
	c = th.client("c2")
	c.Subscribe("ahp-session:/cp")
	c.Subscribe(chat)
	send(t, c, chat, "t3", "write c.txt three")
	waitPushes(t, &again, "turn/3 on the remote", func([]host.PushEnd) bool {
		return remoteRefs(t, repo, bare)[cpPrefix+"3"] != ""
	})
	local := localRefs(t, repo)
	for ref, commit := range pushed {
		if local[ref] != commit {
			t.Errorf("%s is %q here, %s on the remote", ref, local[ref], commit)
		}
	}
	// The clone lacks the files the turns wrote (nobody committed them),
	// so turn 3 started from a tree of its own, recorded after turn/2.
	start := strings.Replace(cpPrefix, "turn/", "start/", 1) + "3"
	if got, want := git(t, repo, "rev-parse", cpPrefix+"3^"), git(t, repo, "rev-parse", start); got != want {
		t.Errorf("turn/3's parent is %s, not its start (%s)", got, want)
	}
	if got := git(t, repo, "rev-parse", start+"^"); got != pushed[cpPrefix+"2"] {
		t.Errorf("turn 3's start follows %s, not the pushed turn/2 (%s)", got, pushed[cpPrefix+"2"])
	}
}

// TestPushCheckpointsRefusesOptions: a remote git could read as an
// option is refused when the host starts.
func TestPushCheckpointsRefusesOptions(t *testing.T) {
	t.Parallel()
	for _, remote := range []string{"--upload-pack=touch x", "-v", "origin\nx"} {
		_, err := host.New(host.Options{StateDir: t.TempDir(), Sessions: "memory", DefaultDirectory: t.TempDir(), PushCheckpoints: remote})
		if err == nil || !strings.Contains(err.Error(), "remote") {
			t.Errorf("%q: %v", remote, err)
		}
	}
}

// TestPushCheckpointsStopAtClose: a push the remote never answers (its
// pre-receive hook waits) gets its window at Close, then is cancelled:
// Close returns, the push has ended with its git, and the cut is neither
// counted nor warned of as a failure.
func TestPushCheckpointsStopAtClose(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bare := bareRemote(t, repo)
	started, _ := gateRemote(t, bare, "exit 1")
	var (
		pushes host.Pushes
		mu     sync.Mutex
		warned int
	)
	th := startHost(t, "", func(o *host.Options) {
		host.WithPushes(o, "origin", &pushes)
		host.WithPushDrain(o, 50*time.Millisecond)
		o.Logger = slog.New(countingHandler{Handler: o.Logger.Handler(), prefix: "could not push", mu: &mu, n: &warned})
	})
	c := th.client("c1")
	_, chat := folderSession(t, c, "cp", repo)
	send(t, c, chat, "t1", "write a.txt one")
	waitClosed(t, started, "the push to reach the remote's hook")
	c.Close()
	th.stop()
	ends, _ := pushes.Ends()
	if len(ends) != 1 || !errors.Is(ends[0].Err, context.Canceled) {
		t.Fatalf("pushes %+v, want one cancelled", ends)
	}
	mu.Lock()
	defer mu.Unlock()
	if warned != 0 {
		t.Errorf("%d warnings of a failed push, for a push cut by the shutdown", warned)
	}
}

// gateRemote gives the bare repository a pre-receive hook that holds the
// first push until open is closed, then ends with last (a shell command);
// later pushes pass. started is closed once the first push reaches the
// hook. Whatever holds it is let go when the test ends.
func gateRemote(t *testing.T, bare, last string) (started <-chan struct{}, open func()) {
	t.Helper()
	dir := t.TempDir()
	ready, gate, first := filepath.Join(dir, "ready"), filepath.Join(dir, "gate"), filepath.Join(dir, "first")
	for _, f := range []string{ready, gate} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := "#!/bin/sh\ncat >/dev/null\n[ -e " + first + " ] && exit 0\ntouch " + first +
		"\necho started > " + ready + "\nread _ < " + gate + "\n" + last + "\n"
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open = func() {
		once.Do(func() {
			// Nobody waiting on the gate (the hook is gone, or never
			// came) is no error: the open fails and nothing is held.
			if f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.WriteString("go\n")
				f.Close()
			}
		})
	}
	// The hook, which outlives a push cut short (it is the remote's), is
	// let go when the test ends.
	t.Cleanup(open)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		os.ReadFile(ready)
	}()
	t.Cleanup(func() {
		// The reader of ready ends even if the hook never came.
		if f, err := os.OpenFile(ready, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-ch
	})
	return ch, open
}

// waitClosed waits for ch to close, failing the test after hosttest.Timeout.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hosttest.Timeout):
		t.Fatalf("waiting for %s", what)
	}
}

// TestPushCheckpointsCoalesce: the checkpoints recorded while a session's
// push is held go in one push after it, which sends the newest refs.
func TestPushCheckpointsCoalesce(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bare := bareRemote(t, repo)
	started, open := gateRemote(t, bare, "exit 0")
	var pushes host.Pushes
	th := startHost(t, "", func(o *host.Options) { host.WithPushes(o, "origin", &pushes) })
	c := th.client("c1")
	session, chat := folderSession(t, c, "cp", repo)
	send(t, c, chat, "t1", "write a.txt one")
	waitClosed(t, started, "the first push to reach the remote's hook")
	send(t, c, chat, "t2", "write b.txt two")
	send(t, c, chat, "t3", "write c.txt three")
	c.WaitState(session, "turn 3 counted", func(s protocol.ChannelState) bool {
		f, _, _ := changes(t, s.(*protocol.SessionState))
		return f == 3
	})
	open()
	waitPushes(t, &pushes, "turn/3 on the remote", func([]host.PushEnd) bool {
		return remoteRefs(t, repo, bare)[cpPrefix+"3"] != ""
	})
	c.Close()
	th.stop() // what was asked for is pushed by now
	ends, _ := pushes.Ends()
	if len(ends) != 2 {
		t.Errorf("%d pushes, want the held one and one after: %+v", len(ends), ends)
	}
	for _, e := range ends {
		if e.Err != nil {
			t.Errorf("push: %v", e.Err)
		}
	}
	if local, remote := localRefs(t, repo), remoteRefs(t, repo, bare); !maps.Equal(local, remote) {
		t.Errorf("the remote has %v, the repository %v", remote, local)
	}
}

// TestPushCheckpointsRemovedOnDispose: disposing of a session takes its
// checkpoint refs off the remote too, and only its.
func TestPushCheckpointsRemovedOnDispose(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bare := bareRemote(t, repo)
	var pushes host.Pushes
	th := startHost(t, "", func(o *host.Options) { host.WithPushes(o, "origin", &pushes) })
	c := th.client("c1")
	session, chat := folderSession(t, c, "cp", repo)
	_, other := folderSession(t, c, "kept", repo)
	send(t, c, chat, "t1", "write a.txt one")
	send(t, c, other, "t1", "write b.txt two")
	waitPushes(t, &pushes, "both sessions on the remote", func([]host.PushEnd) bool {
		remote := remoteRefs(t, repo, bare)
		return remote[cpPrefix+"1"] != "" && remote["refs/agents/kept/checkpoints/turn/1"] != ""
	})
	c.MustCall("disposeSession", map[string]any{"channel": session})
	waitPushes(t, &pushes, "the disposed session's refs to go", func([]host.PushEnd) bool {
		return remoteRefs(t, repo, bare)[cpPrefix+"0"] == ""
	})
	remote := remoteRefs(t, repo, bare)
	for ref := range remote {
		if !strings.HasPrefix(ref, "refs/agents/kept/") {
			t.Errorf("%s is left on the remote", ref)
		}
	}
	if remote["refs/agents/kept/checkpoints/turn/1"] == "" {
		t.Errorf("the other session's checkpoints went too: %v", remote)
	}
}
