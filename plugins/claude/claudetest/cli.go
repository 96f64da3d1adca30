package claudetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// CLIVersion is the version of the Claude Code CLI the claude backend was
// written against: the one tests run and .ci/run installs.
const CLIVersion = "2.1.197"

// CLI returns the Claude Code CLI for a test to run, failing the test with
// how to get it when there is none (FindCLI). Every test binary that
// needs the CLI calls it; the first one on a fresh machine installs it.
func CLI(t testing.TB) string {
	t.Helper()
	cli.once.Do(func() { cli.path, cli.err = FindCLI() })
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return cli.path
}

// cli is FindCLI's answer, asked once per test binary: a test binary's
// tests all run the same CLI.
var cli struct {
	once sync.Once
	path string
	err  error
}

// CacheDir is where the pinned CLI is installed:
// ${XDG_CACHE_HOME:-~/.cache}/ahpd-ci/claude-code-<CLIVersion>.
func CacheDir() (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for the Claude Code CLI: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "ahpd-ci", "claude-code-"+CLIVersion), nil
}

// FindCLI returns $AHPD_CLAUDE when it is set; else the pinned version in
// CacheDir, installing it there with npm when it is missing.
//
// Several test binaries may ask at once (go test ./... runs packages in
// parallel), and a run may be killed halfway: the install holds a file
// lock beside the cache directory, installs into a directory of its own
// and renames it into place only once the CLI in it runs, so a caller
// either finds a whole install or waits for the one under way.
func FindCLI() (string, error) {
	if path := os.Getenv("AHPD_CLAUDE"); path != "" {
		if _, err := exec.LookPath(path); err != nil {
			return "", fmt.Errorf("AHPD_CLAUDE names %s, which does not run: %w", path, err)
		}
		return path, nil
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	if path, ok := cachedCLI(dir); ok {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another binary may have installed it while this one waited.
	if path, ok := cachedCLI(dir); ok {
		return path, nil
	}
	if err := install(dir); err != nil {
		return "", fmt.Errorf("the Claude Code CLI %[1]s is needed and is not installed: %[2]v\n"+
			"Install it with: npm install --prefix %[3]q --no-audit --no-fund @anthropic-ai/claude-code@%[1]s, "+
			"or set AHPD_CLAUDE to a claude of that version", CLIVersion, err, dir)
	}
	if path, ok := cachedCLI(dir); ok {
		return path, nil
	}
	return "", fmt.Errorf("no runnable claude %s in %s after installing it", CLIVersion, dir)
}

// install puts the pinned CLI in dir, which is missing or holds no runnable
// CLI (a partial install of an older installer). The caller holds the lock.
func install(dir string) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm is needed to install it and is not on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".installing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	// MkdirTemp makes it 0700; npm's own directory would be 0755.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-update-notifier",
		"@anthropic-ai/claude-code@"+CLIVersion)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install: %v\n%s", err, out.Bytes())
	}
	if _, ok := cachedCLI(tmp); !ok {
		return fmt.Errorf("npm install left no runnable claude %s:\n%s", CLIVersion, out.Bytes())
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// cachedCLI returns the CLI in dir if it runs and is the pinned version:
// the package's link to its native binary, else the binary itself (the
// link is made by a postinstall step, which npm skips with scripts off).
func cachedCLI(dir string) (string, bool) {
	candidates := []string{filepath.Join(dir, "node_modules", ".bin", "claude")}
	native, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code-*", "claude"))
	for _, path := range append(candidates, native...) {
		out, err := exec.Command(path, "--version").Output()
		if err == nil && strings.HasPrefix(string(out), CLIVersion+" ") {
			return path, true
		}
	}
	return "", false
}
