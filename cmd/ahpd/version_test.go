package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	t.Parallel()
	stamped := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/ahpd/ahpd", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const rev = "9a80947730f42c109cb7a03250a1cb6ed3faca46"
	tests := []struct {
		name    string
		release string
		bi      *debug.BuildInfo
		want    string
	}{
		{"a release's -ldflags win", "v1.2.0", stamped("v0.0.0-20261202142744-9a80947730f4"), "v1.2.0"},
		{"go install of a tag", "", stamped("v1.1.0"), "v1.1.0"},
		{"a checkout's pseudo-version", "", stamped("v0.0.0-20261202142744-9a80947730f4+dirty", "vcs.revision", rev), "v0.0.0-20261202142744-9a80947730f4+dirty"},
		{"a devel build with its commit", "", stamped("(devel)", "vcs.revision", rev, "vcs.modified", "false"), "devel+9a80947730f4"},
		{"a devel build with changes", "", stamped("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "devel+9a80947730f4.dirty"},
		{"no VCS stamp", "", stamped("(devel)"), "devel"},
		{"no build info", "", nil, "devel"},
	}
	for _, tt := range tests {
		if got := buildVersion(tt.release, tt.bi); got != tt.want {
			t.Errorf("%s: buildVersion = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestVersionCommand asks for the version both ways and checks it says
// the version and the Go toolchain, and that nothing else runs.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("ahpd %v exited %d: %s", args, code, errOut.String())
		}
		if !strings.HasPrefix(out.String(), "ahpd "+version+"\n") || !strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("ahpd %v says %q: want the version %q and %s", args, out.String(), version, runtime.Version())
		}
	}
}

// TestInstalledVersion installs ahpd from this checkout into an empty
// GOBIN, as the README says to, and checks that ahpd version names the
// commit the checkout is at.
func TestInstalledVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ahpd; run without -short")
	}
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): there is no commit for the build to name", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		// The go command stamps a build only where .git is a directory:
		// a worktree's is a file naming its repository.
		t.Skip("a git worktree, where the go command stamps no commit into a build")
	}
	bin := t.TempDir()
	args := []string{"install", "-buildvcs=true"}
	if raceEnabled {
		args = append(args, "-race") // the packages the test binary's build compiled
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "ahpd"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("ahpd version: %v\n%s", err, out)
	}
	want := "commit  " + strings.TrimSpace(string(head))
	if !strings.Contains(string(out), want) {
		t.Fatalf("ahpd version says\n%s\nwant a line %q", out, want)
	}
}
