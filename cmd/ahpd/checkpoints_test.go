package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestPushCheckpointsSetting: --push-checkpoints and the file's
// checkpoints.push name the remote, the flag winning; a value git could
// read as an option is refused before anything starts, naming the flag.
func TestPushCheckpointsSetting(t *testing.T) {
	e := newEnv(t)
	file := writeConfig(t, e, "checkpoints: {push: backup}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--config", file}, "backup"},
		{[]string{"--config", file, "--push-checkpoints", "https://git.example.com/app.git"}, "https://git.example.com/app.git"},
	} {
		cfg, err := parseConfig(append([]string{"--state-dir", e.state}, tc.args...), io.Discard)
		if err != nil || cfg.Checkpoints.Push != tc.want {
			t.Errorf("%v: %v, %v, want %q", tc.args, cfg, err, tc.want)
		}
	}
	p := launch(t, e, 0, "--state-dir", e.state, "--push-checkpoints=--upload-pack=touch x")
	if code := p.wait(exitTimeout); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if s := p.stderr.String(); !strings.Contains(s, "--push-checkpoints: the remote") || !strings.Contains(s, "starts with '-'") {
		t.Errorf("stderr does not say what is wrong:\n%s", s)
	}
	bad := writeConfig(t, e, "checkpoints: {push: \"origin\\n-f\"}\n")
	if _, err := parseConfig([]string{"--state-dir", e.state, "--config", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a remote with a newline: %v", err)
	}
}

// TestDaemonPushesCheckpoints: a daemon started with --push-checkpoints
// origin pushes a worktree session's checkpoints and its branch to the
// repository's origin; what a turn recorded just before a stop is
// pushed before the daemon exits.
func TestDaemonPushesCheckpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repo := e.work
	gitIn(t, repo, "init", "-q")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "start")
	bare := filepath.Join(e.root, "remote.git")
	gitIn(t, e.root, "init", "-q", "--bare", bare)
	gitIn(t, repo, "remote", "add", "origin", bare)

	p := serveDaemon(t, e, "--without-connection-token", "--push-checkpoints", "origin")
	c := connect(t, p, "", "c1")
	session := "ahp-session:/pushed"
	c.MustCall("createSession", map[string]any{
		"channel": session, "provider": "script", "workingDirectories": []string{"file://" + repo},
		"config": map[string]any{"isolation": "worktree", "autoApprove": "allow"},
	})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	send(t, c, chat, "t1", "write a.txt one")
	send(t, c, chat, "t2", "write b.txt two")
	c.Close()
	p.terminate()

	local := gitIn(t, repo, "for-each-ref", "--format=%(objectname)\t%(refname)", "refs/agents/pushed/", "refs/heads/pushed")
	remote := gitIn(t, repo, "ls-remote", "--", bare, "refs/agents/*", "refs/heads/pushed")
	if !strings.Contains(local, "refs/agents/pushed/checkpoints/turn/2") || !strings.Contains(local, "refs/heads/pushed") {
		t.Fatalf("the repository has\n%s", local)
	}
	if remote != local {
		t.Errorf("the remote has\n%s\nthe repository\n%s", remote, local)
	}
}
