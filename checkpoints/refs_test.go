package checkpoints

import (
	"strings"
	"testing"
)

func TestSessionComponent(t *testing.T) {
	for _, id := range []string{
		"abc", "0b9f0c6e-3f1a-4b7e-9d2a-1c2b3d4e5f60", "a.b_c-d", "x.y.z",
	} {
		if got := sessionComponent(id); got != id {
			t.Errorf("sessionComponent(%q) = %q, want it unchanged", id, got)
		}
	}
	// Rewritten ids keep a readable prefix and gain the hash suffix.
	for id, prefix := range map[string]string{
		"a b":             "a-b--",
		"ü/ö":             "-----",
		".hidden":         "-hidden--",
		"x.lock":          "x.lock--",
		"@{1}":            "--1---",
		"a..b":            "a.-b--",
		"--upload-pack=x": "--upload-pack-x--",
		"":                "--",
	} {
		got := sessionComponent(id)
		if !strings.HasPrefix(got, prefix) || len(got) != len(prefix)+hashLen || !looksHashed(got) {
			t.Errorf("sessionComponent(%q) = %q, want %q followed by %d hex digits", id, got, prefix, hashLen)
		}
	}
	// An id that looks rewritten is rewritten, so it cannot collide with
	// the id it seems to come from.
	rewritten := sessionComponent("a b")
	if got := sessionComponent(rewritten); got == rewritten {
		t.Errorf("sessionComponent(%q) kept a rewritten-looking id", rewritten)
	}
	if got := sessionComponent(strings.Repeat("x", 500)); len(got) != maxIDLen+len(hashSep)+hashLen {
		t.Errorf("long id gave %d bytes", len(got))
	}
}

// TestCheckRefNameAgreesWithGit checks that every name checkRefName accepts
// git accepts too, and that it refuses what git refuses.
func TestCheckRefNameAgreesWithGit(t *testing.T) {
	t.Parallel()
	names := []string{
		"refs/agents/a/checkpoints/turn/0",
		"refs/agents/a-b--0123456789abcdef/checkpoints/turn/12",
		"refs/agents/-x/checkpoints/turn/1",
		"refs/agents/x.y/checkpoints/turn/1",
		"refs/agents/.x/checkpoints/turn/1",
		"refs/agents/x.lock/checkpoints/turn/1",
		"refs/agents/x..y/checkpoints/turn/1",
		"refs/agents/x./checkpoints/turn/1",
		"refs/agents/x/checkpoints/turn/1.",
		"refs/agents//x",
		"refs/agents/x/",
		"refs/agents/@{1}/x",
		"refs/agents/a b/x",
		"refs/agents/a~b/x",
		"refs/agents/a:b/x",
		"refs/agents/a*b/x",
		"refs/agents/a\\b/x",
		"refs/agents/ü/x",
		"refs/agents/a\tb/x",
		"refs",
	}
	for _, name := range names {
		ours := checkRefName(name) == nil
		_, gitErr := runErr(t.TempDir(), "check-ref-format", name)
		if ours && gitErr != nil {
			t.Errorf("checkRefName accepts %q, git does not: %v", name, gitErr)
		}
		if !ours && gitErr == nil && !strings.Contains(name, "ü") {
			t.Errorf("checkRefName refuses %q, which git accepts", name)
		}
	}
}

func TestParseTurn(t *testing.T) {
	const p = "refs/agents/s/checkpoints/turn/"
	for ref, want := range map[string]int{p + "0": 0, p + "7": 7, p + "123": 123} {
		if n, ok := parseTurn(ref, p); !ok || n != want {
			t.Errorf("parseTurn(%q) = %d, %v", ref, n, ok)
		}
	}
	for _, ref := range []string{p, p + "01", p + "-1", p + "+1", p + "x", p + "1/2", "refs/other/1"} {
		if n, ok := parseTurn(ref, p); ok {
			t.Errorf("parseTurn(%q) = %d, want rejected", ref, n)
		}
	}
}

func TestParseNumstat(t *testing.T) {
	out := "3\t1\ta.txt\x00-\t-\timg.bin\x000\t0\t\x00old name\x00new\tname\x002\t0\tline\nbreak\x00"
	files, err := parseNumstat([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []FileStat{
		{Path: "a.txt", Additions: 3, Deletions: 1},
		{Path: "img.bin", Binary: true},
		{Path: "new\tname", OldPath: "old name"},
		{Path: "line\nbreak", Additions: 2},
	}
	if len(files) != len(want) {
		t.Fatalf("got %+v, want %+v", files, want)
	}
	for i := range want {
		if files[i] != want[i] {
			t.Errorf("file %d = %+v, want %+v", i, files[i], want[i])
		}
	}
	if s := Sum(files); s != (Stats{Files: 4, Additions: 5, Deletions: 1}) {
		t.Errorf("Sum = %+v", s)
	}
	for _, bad := range []string{"1\t2\ta", "1\ta\x00", "x\t1\ta\x00", "1\t1\t\x00only-old\x00"} {
		if _, err := parseNumstat([]byte(bad)); err == nil {
			t.Errorf("parseNumstat(%q) succeeded", bad)
		}
	}
}
