package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIncludeFilesAndSymlinkFolders(t *testing.T) {
	repo := newRepo(t, ".env\nnode_modules/\n*.local\nbin/\n*.js\n")
	writeFile(t, filepath.Join(repo, ".env"), "SECRET=1\n", 0o600)
	writeFile(t, filepath.Join(repo, "node_modules", "pkg", "index.js"), "module", 0o644)
	writeFile(t, filepath.Join(repo, "pkg", "a", "node_modules", "dep.js"), "dep", 0o644)
	writeFile(t, filepath.Join(repo, "conf", "deep", "app.local"), "local", 0o644)
	writeFile(t, filepath.Join(repo, "bin", "tool"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(repo, "loose.js"), "loose", 0o644)
	// A tracked file the patterns name: it is not eligible, and the tree
	// keeps the committed content, not the source's edit.
	writeFile(t, filepath.Join(repo, "tracked.txt"), "committed\n", 0o644)
	gitT(t, repo, "add", "tracked.txt")
	gitT(t, repo, "commit", "-q", "-m", "tracked")
	writeFile(t, filepath.Join(repo, "tracked.txt"), "edited in the source\n", 0o644)

	log, lb := newLog()
	m := NewManager("", log)
	tr := create(t, m, Spec{
		Dir:            repo,
		Name:           "s1",
		SymlinkFolders: []string{"node_modules", "[broken"},
		IncludeFiles:   []string{".env", "*.local", "bin/tool", "*.js", "tracked.txt", "../../etc/passwd", "!loose.js"},
	})

	// Folders: linked by absolute path, at every depth, never copied.
	for _, rel := range []string{"node_modules", "pkg/a/node_modules"} {
		p := filepath.Join(tr.Path, rel)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink in the tree (%v)", rel, err)
			continue
		}
		if target, _ := os.Readlink(p); target != filepath.Join(repo, rel) {
			t.Errorf("%s -> %s, want %s", rel, target, filepath.Join(repo, rel))
		}
	}
	if got := readFile(t, filepath.Join(tr.Path, "node_modules", "pkg", "index.js")); got != "module" {
		t.Errorf("through the link: %q", got)
	}

	// Files: copied with their modes, parents made.
	for rel, perm := range map[string]os.FileMode{".env": 0o600, "conf/deep/app.local": 0o644, "bin/tool": 0o755} {
		fi, err := os.Lstat(filepath.Join(tr.Path, rel))
		if err != nil {
			t.Errorf("%s not copied: %v", rel, err)
			continue
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, want a regular file with %v", rel, fi.Mode(), perm)
		}
	}
	if got := readFile(t, filepath.Join(tr.Path, ".env")); got != "SECRET=1\n" {
		t.Errorf(".env = %q", got)
	}
	if got := readFile(t, filepath.Join(tr.Path, "tracked.txt")); got != "committed\n" {
		t.Errorf("tracked.txt = %q: a tracked file was copied", got)
	}
	if exists(filepath.Join(tr.Path, "loose.js")) {
		t.Error("loose.js copied although a later !pattern takes it back")
	}

	logs := lb.String()
	for _, want := range []string{`pattern=[broken`, `pattern=../../etc/passwd`, `pattern=tracked.txt`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "file not copied") {
		t.Errorf("a file under a linked folder was offered for copying:\n%s", logs)
	}
}

// A symlink in the source is followed only while it stays in the
// checkout, and a tree whose branch turns a folder into a symlink out of
// the tree is not written through.
func TestPopulateStaysInside(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "outside secret", 0o644)

	repo := newRepo(t, "*.env\nlinks/\n")
	writeFile(t, filepath.Join(repo, "conf", "keep"), "k", 0o644)
	gitT(t, repo, "add", "conf/keep")
	gitT(t, repo, "commit", "-q", "-m", "conf")
	// A branch where conf is a symlink to a folder outside everything.
	gitT(t, repo, "checkout", "-q", "-b", "evil")
	gitT(t, repo, "rm", "-q", "-r", "conf")
	if err := os.Symlink(outside, filepath.Join(repo, "conf")); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "add", "conf")
	gitT(t, repo, "commit", "-q", "-m", "evil")
	gitT(t, repo, "checkout", "-q", "main")

	writeFile(t, filepath.Join(repo, "conf", "x.env"), "would escape", 0o644)
	writeFile(t, filepath.Join(repo, "real.env"), "real", 0o644)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(repo, "out.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.env", filepath.Join(repo, "in.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "links"), 0o755); err != nil {
		t.Fatal(err)
	}

	log, lb := newLog()
	m := NewManager("", log)
	tr := create(t, m, Spec{Dir: repo, Name: "s1", Branch: "evil", IncludeFiles: []string{"*.env"}})

	if exists(filepath.Join(outside, "x.env")) {
		t.Fatal("a copy was written through the tree's symlink to outside")
	}
	if exists(filepath.Join(tr.Path, "out.env")) {
		t.Error("a symlink out of the checkout was followed")
	}
	if got := readFile(t, filepath.Join(tr.Path, "in.env")); got != "real" {
		t.Errorf("in.env = %q, want the content of the file it links to", got)
	}
	if fi, err := os.Lstat(filepath.Join(tr.Path, "in.env")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("in.env in the tree is not a regular file: %v", err)
	}
	if !strings.Contains(lb.String(), "out.env") {
		t.Errorf("the skipped symlink is not logged:\n%s", lb.String())
	}
}

func TestCheckPattern(t *testing.T) {
	for _, p := range []string{".env", "*.local", "/build/", "**/node_modules", "!keep.env", "a/b/c"} {
		if err := checkPattern(p); err != nil {
			t.Errorf("checkPattern(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "   ", "!", "#comment", "../x", "a/../b", "./x", "[z", "a\x00b"} {
		if err := checkPattern(p); err == nil {
			t.Errorf("checkPattern(%q) accepted", p)
		}
	}
}
