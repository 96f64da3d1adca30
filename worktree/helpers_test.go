package worktree

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// gitT runs git for a test with a fixed identity and defaults, so the
// tests do not depend on the machine's git config, and fails the test on
// error.
func gitT(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := gitE(dir, args...)
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// gitE is gitT without failing: it returns the combined output.
func gitE(dir string, args ...string) (string, error) {
	full := append([]string{
		"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
		"-c", "commit.gpgsign=false", "-c", "protocol.file.allow=always",
	}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	cmd.Env = append(scrubbedEnv, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitStdin runs git with input on its stdin.
func gitStdin(tb testing.TB, dir, input string, args ...string) {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = scrubbedEnv
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newRepo makes a repository with one commit holding a README and the
// given .gitignore, and returns its folder.
func newRepo(tb testing.TB, gitignore string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	gitT(tb, filepath.Dir(dir), "init", "-q", dir)
	writeFile(tb, filepath.Join(dir, "README"), "hello\n", 0o644)
	if gitignore != "" {
		writeFile(tb, filepath.Join(dir, ".gitignore"), gitignore, 0o644)
	}
	gitT(tb, dir, "add", "-A")
	gitT(tb, dir, "commit", "-q", "-m", "init")
	return dir
}

func writeFile(tb testing.TB, name, content string, perm os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), perm); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(name, perm); err != nil {
		tb.Fatal(err)
	}
}

func readFile(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

// logBuf is a logger whose output a test can read.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLog() (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// create makes a tree and fails the test if it cannot.
func create(tb testing.TB, m *Manager, s Spec) *Tree {
	tb.Helper()
	t, err := m.Create(context.Background(), s)
	if err != nil {
		tb.Fatalf("Create(%+v): %v", s, err)
	}
	return t
}
