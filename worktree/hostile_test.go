package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHostileBranches(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	ctx := context.Background()
	for _, b := range []string{"--upload-pack=x", "-b", "@{-1}", "main two", "main~1", "a:b", "x..y"} {
		_, err := m.Create(ctx, Spec{Dir: repo, Name: "s", Branch: b})
		if !errors.Is(err, ErrBadBranch) {
			t.Errorf("Branch %q: err = %v, want ErrBadBranch", b, err)
		}
		_, err = m.Create(ctx, Spec{Dir: repo, Name: "s", Branch: b, CheckoutBranch: true})
		if !errors.Is(err, ErrBadBranch) {
			t.Errorf("Branch %q, CheckoutBranch: err = %v, want ErrBadBranch", b, err)
		}
	}
	for _, p := range []string{"--track=", "-", "a b/", "x..y/", "x:", "a/.lock/"} {
		_, err := m.Create(ctx, Spec{Dir: repo, Name: "s", BranchPrefix: p})
		if !errors.Is(err, ErrBadBranch) {
			t.Errorf("BranchPrefix %q: err = %v, want ErrBadBranch", p, err)
		}
	}
	// Nothing was made by the refused ones.
	if entries, _ := os.ReadDir(repo + ".worktrees"); len(entries) != 0 {
		t.Errorf("refused specs left %d entries in the location", len(entries))
	}
	if out := gitT(t, repo, "branch", "--list"); out != "* main" {
		t.Errorf("refused specs left branches:\n%s", out)
	}
	// A prefix in another script is a valid branch name and is taken.
	tr := create(t, m, Spec{Dir: repo, Name: "s", BranchPrefix: "agénts/ü-"})
	if tr.Branch != "agénts/ü-s" {
		t.Errorf("Branch = %q", tr.Branch)
	}
}

func TestHostileNames(t *testing.T) {
	repo := newRepo(t, "")
	m := NewManager("", nil)
	loc := repo + ".worktrees"
	for _, id := range []string{"../../x", "/etc/passwd", "..", "-rf", "a b\tc", "héllo wörld 🙂", ".lock", "x.lock", strings.Repeat("é", 200), "refs/heads/main"} {
		tr := create(t, m, Spec{Dir: repo, Name: id})
		if filepath.Dir(tr.Path) != loc {
			t.Errorf("name %q: tree at %s, outside %s", id, tr.Path, loc)
		}
		if !exists(tr.Path) {
			t.Errorf("name %q: no tree at %s", id, tr.Path)
		}
		if tr.Branch != filepath.Base(tr.Path) {
			t.Errorf("name %q: branch %q, folder %q", id, tr.Branch, filepath.Base(tr.Path))
		}
	}
	// Nothing escaped the location.
	if exists(filepath.Join(filepath.Dir(repo), "x")) || exists(filepath.Join(filepath.Dir(loc), "x")) {
		t.Error("a name escaped the location")
	}
}

func TestTreeName(t *testing.T) {
	cases := map[string]string{
		"abc":                                  "abc",
		"0f8c3a1e-2b4d-4c6e-9a7b-123456789abc": "0f8c3a1e-2b4d-4c6e-9a7b-123456789abc",
		"Session_1.2":                          "Session_1.2",
	}
	for in, want := range cases {
		if got := TreeName(in); got != want {
			t.Errorf("TreeName(%q) = %q, want %q", in, got, want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"", "../../x", "..x", "a..b", "-x", ".x", "x.lock", "x.lock.lock", "x.", "a b", "a  b", "a/b", "a\\b",
		"héllo", "🙂", ".lock", "...", strings.Repeat("a", 100), strings.Repeat("a", 64), strings.Repeat("a", 65), "a@{b}", "a~b^c:d"} {
		got := TreeName(in)
		if got == "" || len(got) > maxNameLen || !utf8.ValidString(got) {
			t.Errorf("TreeName(%q) = %q: empty, too long or not UTF-8", in, got)
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				t.Errorf("TreeName(%q) = %q holds %q", in, got, r)
			}
		}
		if strings.HasPrefix(got, ".") || strings.HasPrefix(got, "-") || strings.Contains(got, "..") ||
			strings.HasSuffix(got, ".lock") || strings.HasSuffix(got, ".") {
			t.Errorf("TreeName(%q) = %q breaks a rule", in, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("TreeName(%q) = TreeName(%q) = %q", in, prev, got)
		}
		seen[got] = in
		if TreeName(in) != got {
			t.Errorf("TreeName(%q) is not stable", in)
		}
	}
	if got := TreeName(strings.Repeat("a", 64)); got != strings.Repeat("a", 64) {
		t.Errorf("a 64-byte clean name was changed to %q", got)
	}
}
