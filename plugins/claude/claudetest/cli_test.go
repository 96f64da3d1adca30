package claudetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
)

// fakeNPM puts on PATH an npm whose install of the CLI makes a claude
// printing the pinned version, and counts its installs in a file it
// returns.
func fakeNPM(t *testing.T) (count string) {
	bin := t.TempDir()
	count = filepath.Join(t.TempDir(), "installs")
	script := `#!/bin/sh
# npm install --prefix DIR ... : a CLI of the pinned version in DIR.
[ "$1" = install ] && [ "$2" = --prefix ] || exit 2
echo x >> ` + count + `
mkdir -p "$3/node_modules/.bin"
sleep 0.2 # long enough for the other callers to be waiting
printf '#!/bin/sh\necho "` + claudetest.CLIVersion + ` (Claude Code)"\n' > "$3/node_modules/.bin/claude"
chmod +x "$3/node_modules/.bin/claude"
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return count
}

// TestFindCLIInstallsOnce has several callers find the CLI at once in an
// empty cache, as test binaries of several packages do: npm runs once, and
// every caller gets the one install, renamed into place whole.
func TestFindCLIInstallsOnce(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("AHPD_CLAUDE", "")
	count := fakeNPM(t)
	dir, err := claudetest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// A partial install of an older installer: replaced, not trusted.
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}

	const callers = 4
	paths := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { paths[i], errs[i] = claudetest.FindCLI() })
	}
	wg.Wait()
	want := filepath.Join(dir, "node_modules", ".bin", "claude")
	for i := range callers {
		if errs[i] != nil || paths[i] != want {
			t.Errorf("caller %d: %q, %v; want %q", i, paths[i], errs[i], want)
		}
	}
	if data, _ := os.ReadFile(count); strings.Count(string(data), "x") != 1 {
		t.Errorf("npm ran %d times, want once", strings.Count(string(data), "x"))
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*.installing-*"))
	if len(left) != 0 {
		t.Errorf("install directories left behind: %q", left)
	}
}

// TestFindCLIWithoutNPM checks a machine with neither the CLI nor npm gets
// an error saying what is missing and how to get the CLI.
func TestFindCLIWithoutNPM(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("AHPD_CLAUDE", "")
	t.Setenv("PATH", t.TempDir())
	_, err := claudetest.FindCLI()
	if err == nil || !strings.Contains(err.Error(), "npm is needed") || !strings.Contains(err.Error(), "AHPD_CLAUDE") {
		t.Errorf("FindCLI without npm: %v", err)
	}
}

// TestFindCLIFromEnvironment checks $AHPD_CLAUDE is taken when it runs,
// and refused, saying so, when it does not.
func TestFindCLIFromEnvironment(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	cli := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AHPD_CLAUDE", cli)
	if path, err := claudetest.FindCLI(); path != cli || err != nil {
		t.Errorf("FindCLI = %q, %v; want %q", path, err, cli)
	}
	t.Setenv("AHPD_CLAUDE", cli+".missing")
	if _, err := claudetest.FindCLI(); err == nil || !strings.Contains(err.Error(), "AHPD_CLAUDE") {
		t.Errorf("FindCLI with a missing AHPD_CLAUDE: %v", err)
	}
}
