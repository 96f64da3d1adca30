package checkpoints

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRemote(t *testing.T) {
	for _, tc := range []struct {
		remote string
		ok     bool
		name   bool
	}{
		{"origin", true, true},
		{"backup_2.x", true, true},
		{"https://git.example.com/team/app.git", true, false},
		{"git@example.com:team/app.git", true, false},
		{"/srv/mirrors/app.git", true, false},
		{"../app.git", true, false},
		{"", false, false},
		{"-v", false, false},
		{"--upload-pack=touch /tmp/x", false, false},
		{"origin\n--force", false, false},
		{"tab\there", false, false},
		{strings.Repeat("a", maxRemoteLen+1), false, true},
	} {
		err := CheckRemote(tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRemote(%q) = %v, want ok %v", clip(tc.remote), err, tc.ok)
		}
		if tc.ok && IsRemoteName(tc.remote) != tc.name {
			t.Errorf("IsRemoteName(%q) = %v", tc.remote, !tc.name)
		}
	}
}

func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"origin":                                  "origin",
		"git@example.com:team/app.git":            "git@example.com:team/app.git",
		"https://example.com/app.git":             "https://example.com/app.git",
		"https://bot:s3cret@example.com/app.git":  "https://***@example.com/app.git",
		"ssh://git@example.com/app@v2.git":        "ssh://***@example.com/app@v2.git",
		"https://tok@en:x@example.com:8443/a.git": "https://***@example.com:8443/a.git",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPushAndFetch: a session's checkpoints and its branch reach a bare
// remote under the same names; a clone without them fetches them back;
// a remote that is no repository is an error naming git's reason.
func TestPushAndFetch(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	bare := filepath.Join(t.TempDir(), "remote.git")
	run(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	run(t, dir, "remote", "add", "origin", bare)
	run(t, dir, "branch", "agents/s1")
	r := open(t, dir)
	if ok, err := r.HasRemote(ctx, "origin"); err != nil || !ok {
		t.Fatalf("HasRemote(origin) = %v, %v", ok, err)
	}
	if ok, err := r.HasRemote(ctx, "orig"); err != nil || ok {
		t.Fatalf("HasRemote(orig) = %v, %v", ok, err)
	}
	c0, err := r.Capture(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.txt", "b\n")
	c1, err := r.Capture(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Capture(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "origin", "s1", "agents/s1"); err != nil {
		t.Fatal(err)
	}
	remote := run(t, dir, "ls-remote", "--", bare)
	for _, want := range []string{c0 + "\trefs/agents/s1/checkpoints/turn/0", c1 + "\trefs/agents/s1/checkpoints/turn/1", "\trefs/heads/agents/s1"} {
		if !strings.Contains(remote, want) {
			t.Errorf("the remote lacks %q:\n%s", want, remote)
		}
	}
	if strings.Contains(remote, "refs/agents/other/") {
		t.Errorf("another session's checkpoints were pushed:\n%s", remote)
	}

	clone := filepath.Join(t.TempDir(), "clone")
	run(t, filepath.Dir(clone), "clone", "-q", bare, clone)
	rc := open(t, clone)
	if ok, err := rc.HasCheckpoint(ctx, "s1", 1); err != nil || ok {
		t.Fatalf("the clone has turn/1 already: %v, %v", ok, err)
	}
	if err := rc.Fetch(ctx, "origin", "s1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := rc.HasCheckpoint(ctx, "s1", 1); err != nil || !ok {
		t.Fatalf("the clone lacks turn/1 after the fetch: %v, %v", ok, err)
	}
	cps, err := rc.Checkpoints(ctx, "s1")
	if err != nil || len(cps) != 2 || cps[1].Commit != c1 {
		t.Fatalf("the clone's checkpoints: %+v, %v", cps, err)
	}
	if _, err := os.Stat(filepath.Join(clone, ".git", "FETCH_HEAD")); err == nil {
		t.Error("the fetch wrote FETCH_HEAD")
	}

	// Removal: the session's refs go from the remote, another's stay.
	if err := r.Push(ctx, "origin", "other", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := r.PushRemoval(ctx, "origin", "s1"); err != nil {
		t.Fatal(err)
	}
	remote = run(t, dir, "ls-remote", "--", bare)
	if strings.Contains(remote, "refs/agents/s1/") || !strings.Contains(remote, "refs/agents/other/checkpoints/turn/0") ||
		!strings.Contains(remote, "refs/heads/agents/s1") {
		t.Errorf("after the removal the remote has\n%s", remote)
	}

	nowhere := t.TempDir()
	err = r.Push(ctx, nowhere, "s1", "")
	if err == nil || !strings.Contains(err.Error(), "does not appear to be a git repository") {
		t.Errorf("a push to a folder that is no repository: %v", err)
	}
	if err := r.Push(ctx, "--receive-pack=touch x", "s1", ""); err == nil {
		t.Error("a push to an option was run")
	}
}

// BenchmarkPush records a checkpoint and pushes the session's refs to a
// bare repository on the same disk, as a host does after each turn: the
// cost of git push itself, the network left out.
func BenchmarkPush(b *testing.B) {
	ctx := context.Background()
	dir := newRepo(b, map[string]string{"a.txt": "a\n"})
	bare := filepath.Join(b.TempDir(), "remote.git")
	run(b, filepath.Dir(bare), "init", "-q", "--bare", bare)
	run(b, dir, "remote", "add", "origin", bare)
	r := open(b, dir)
	if _, err := r.Capture(ctx, "s1", 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		write(b, dir, "a.txt", strings.Repeat("x", i+1))
		if _, err := r.Capture(ctx, "s1", i+1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := r.Push(ctx, "origin", "s1", ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/push")
}
