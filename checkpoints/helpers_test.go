package checkpoints

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain keeps the tests independent of the machine's git configuration:
// no global or system config is read, so identity, signing and default
// branch come only from what the tests set.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, name := range append(strippedEnv, "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT") {
		os.Unsetenv(name)
	}
	os.Exit(m.Run())
}

// testGitEnv gives test commits an identity without relying on any config.
var testGitEnv = []string{
	"GIT_AUTHOR_NAME=Test User",
	"GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=Test User",
	"GIT_COMMITTER_EMAIL=test@example.com",
	"GIT_TERMINAL_PROMPT=0",
	// The helpers inspect state; they must not refresh the user's index.
	"GIT_OPTIONAL_LOCKS=0",
}

// run runs git as a user of the repository would and returns its trimmed
// stdout.
func run(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := runErr(dir, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func runErr(dir string, args ...string) (string, error) {
	full := append([]string{"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testGitEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

func write(tb testing.TB, dir, rel, content string) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func remove(tb testing.TB, dir, rel string) {
	tb.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		tb.Fatal(err)
	}
}

// newRepo makes a repository with one commit holding files (path to
// content) and returns its directory.
func newRepo(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	run(tb, dir, "init", "-q")
	for p, c := range files {
		write(tb, dir, p, c)
	}
	run(tb, dir, "add", "-A")
	run(tb, dir, "commit", "-q", "--allow-empty", "-m", "initial")
	return dir
}

func open(tb testing.TB, dir string) *Repo {
	tb.Helper()
	r, err := Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// treeOf returns the files of a commit or tree, path to content.
func treeOf(tb testing.TB, dir, rev string) map[string]string {
	tb.Helper()
	files := map[string]string{}
	out := run(tb, dir, "ls-tree", "-r", "-z", "--name-only", rev)
	for _, p := range strings.Split(out, "\x00") {
		if p == "" {
			continue
		}
		files[p] = run(tb, dir, "cat-file", "blob", rev+":"+p)
	}
	return files
}

// userState is everything a capture must leave alone, as bytes.
type userState struct {
	index      string
	indexMtime time.Time
	head       string
	headRef    string
	refs       string // branches, tags and the stash
	stashList  string
	files      string // every file outside .git, with a hash of its content
}

func stateOf(tb testing.TB, dir string) userState {
	tb.Helper()
	var s userState
	indexPath := run(tb, dir, "rev-parse", "--git-path", "index")
	if !filepath.IsAbs(indexPath) {
		indexPath = filepath.Join(dir, indexPath)
	}
	b, err := os.ReadFile(indexPath)
	if err != nil {
		tb.Fatal(err)
	}
	s.index = string(b)
	fi, err := os.Stat(indexPath)
	if err != nil {
		tb.Fatal(err)
	}
	s.indexMtime = fi.ModTime()
	s.head = run(tb, dir, "rev-parse", "HEAD")
	s.headRef = run(tb, dir, "symbolic-ref", "-q", "HEAD")
	s.refs = run(tb, dir, "for-each-ref", "refs/heads", "refs/tags", "refs/stash")
	s.stashList = run(tb, dir, "stash", "list")
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		c, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, fmt.Sprintf("%s %v %v %x", p, fi.Mode(), fi.ModTime(), sha256.Sum256(c)))
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(files)
	s.files = strings.Join(files, "\n")
	return s
}

func checkStateUnchanged(tb testing.TB, before, after userState) {
	tb.Helper()
	if before.index != after.index {
		tb.Error("the user's index changed")
	}
	if !before.indexMtime.Equal(after.indexMtime) {
		tb.Errorf("the user's index mtime changed: %v -> %v", before.indexMtime, after.indexMtime)
	}
	if before.head != after.head || before.headRef != after.headRef {
		tb.Errorf("HEAD changed: %s %s -> %s %s", before.headRef, before.head, after.headRef, after.head)
	}
	if before.refs != after.refs {
		tb.Errorf("branches, tags or stash changed:\n%s\n->\n%s", before.refs, after.refs)
	}
	if before.stashList != after.stashList {
		tb.Errorf("stash list changed:\n%s\n->\n%s", before.stashList, after.stashList)
	}
	if before.files != after.files {
		tb.Errorf("working tree changed:\n%s\n->\n%s", before.files, after.files)
	}
}
