package checkpoints

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestPatch: one file's unified diff between two checkpoints, a text
// file's, a binary one's (named with its size, no text), a large one's
// in pages that add up to the whole, a renamed one's; a path is a
// literal (a file named "*.txt" is that file only), and paths outside
// the repository are refused.
func TestPatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n", "*.txt": "star\n", "img.bin": "\x00\x01", "old.txt": strings.Repeat("keep me\n", 20)})
	r := open(t, dir)
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&big, "line %d é\n", i)
	}
	write(t, dir, "a.txt", "1\ntwo\n3\n")
	write(t, dir, "*.txt", "stars\n")
	write(t, dir, "img.bin", "\x00\x02\x03\x04")
	write(t, dir, "big.txt", big.String())
	remove(t, dir, "old.txt")
	write(t, dir, "new.txt", strings.Repeat("keep me\n", 20)+"and me\n")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	cps, err := r.Checkpoints(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	to := cps[1].Commit
	from, err := r.Parent(ctx, to)
	if err != nil || from != cps[0].Commit {
		t.Fatalf("the parent of turn 1: %q %v, want %s", from, err, cps[0].Commit)
	}
	if p, err := r.Parent(ctx, cps[0].Commit); err != nil || p != "" {
		t.Fatalf("the parent of turn 0: %q %v", p, err)
	}
	files, err := r.DiffFiles(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	stat := map[string]FileStat{}
	for _, f := range files {
		stat[f.Path] = f
	}

	p, err := r.Patch(ctx, from, to, stat["a.txt"], Page{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Text, "diff --git a/a.txt b/a.txt\n") || !strings.HasSuffix(p.Text, "@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n") ||
		p.Next != 0 || p.Total != int64(len(p.Text)) || p.File.Path != "a.txt" {
		t.Errorf("a.txt: %+v", p)
	}
	// A literal path: "*.txt" is not every .txt file.
	if p, err = r.Patch(ctx, from, to, stat["*.txt"], Page{}); err != nil || strings.Count(p.Text, "diff --git") != 1 || !strings.Contains(p.Text, "+stars\n") {
		t.Errorf("*.txt: %v %q", err, p.Text)
	}
	if p, err = r.Patch(ctx, from, to, stat["img.bin"], Page{}); err != nil || !p.File.Binary || p.Size != 4 || p.Text != "" {
		t.Errorf("img.bin: %+v %v", p, err)
	}
	ren := stat["new.txt"]
	if ren.OldPath != "old.txt" {
		t.Fatalf("the rename: %+v", ren)
	}
	if p, err = r.Patch(ctx, from, to, ren, Page{}); err != nil || !strings.Contains(p.Text, "rename from old.txt\nrename to new.txt\n") || !strings.Contains(p.Text, "+and me\n") {
		t.Errorf("the rename: %v %q", err, p.Text)
	}

	// A large diff, in pages of at most 10,000 bytes and 300 lines, each
	// ending at a line's end, that add up to the whole.
	whole, err := r.Patch(ctx, from, to, stat["big.txt"], Page{Bytes: MaxPageBytes})
	if err != nil || whole.Next != 0 || int64(len(whole.Text)) != whole.Total || strings.Count(whole.Text, "\n+line ") != 5000 {
		t.Fatalf("big.txt whole: %d bytes of %d, next %d, %v", len(whole.Text), whole.Total, whole.Next, err)
	}
	var got strings.Builder
	pages := 0
	for off := int64(0); ; pages++ {
		p, err := r.Patch(ctx, from, to, stat["big.txt"], Page{Offset: off, Bytes: 10000, Lines: 300})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Text) > 10000 || strings.Count(p.Text, "\n") > 300 || !strings.HasSuffix(p.Text, "\n") || p.Offset != off {
			t.Fatalf("page %d at %d: %d bytes, %d lines", pages, off, len(p.Text), strings.Count(p.Text, "\n"))
		}
		got.WriteString(p.Text)
		if p.Next == 0 {
			break
		}
		off = p.Next
	}
	if got.String() != whole.Text || pages < 16 {
		t.Errorf("%d pages make %d bytes, want %d", pages+1, got.Len(), len(whole.Text))
	}
	if p, err := r.Patch(ctx, from, to, stat["big.txt"], Page{Offset: whole.Total + 5}); err != nil || p.Text != "" || p.Next != 0 {
		t.Errorf("past the end: %+v %v", p, err)
	}

	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", "./a.txt", "a//b", "a\nb", "-p"} {
		f := FileStat{Path: bad}
		if bad == "-p" {
			// Not an option after "--", and a literal: simply no change.
			if p, err := r.Patch(ctx, from, to, f, Page{}); err != nil || p.Text != "" {
				t.Errorf("%q: %+v %v", bad, p, err)
			}
			continue
		}
		if _, err := r.Patch(ctx, from, to, f, Page{}); err == nil {
			t.Errorf("the path %q was taken", bad)
		}
	}
	if _, err := r.Patch(ctx, "--output=/tmp/x", to, stat["a.txt"], Page{}); err == nil {
		t.Error("an option as a revision was taken")
	}
	if _, err := r.Patch(ctx, from, to, stat["a.txt"], Page{Bytes: MaxPageBytes + 1}); err == nil {
		t.Error("a page too large was taken")
	}
	if rel, err := r.RelPath(filepath.Join(dir, "sub", "x.txt")); err != nil || rel != "sub/x.txt" {
		t.Errorf("RelPath inside: %q %v", rel, err)
	}
	for _, abs := range []string{filepath.Dir(dir), filepath.Join(dir, "..", "other"), dir, "relative/x"} {
		if rel, err := r.RelPath(abs); err == nil {
			t.Errorf("RelPath(%s) = %q, want it refused", abs, rel)
		}
	}
}

// TestOwnTrees: the session's whole change, file by file, lies between
// the two trees OwnTrees writes, whatever another session changed
// between its turns.
func TestOwnTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r := open(t, dir)
	if _, err := r.Capture(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "a1\n")
	if _, err := r.Capture(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.txt", "somebody else\n")
	tree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RecordStart(ctx, "s", 2, tree, ""); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "a2\n")
	write(t, dir, "c.txt", "c\n")
	if _, err := r.Capture(ctx, "s", 2); err != nil {
		t.Fatal(err)
	}
	o, err := r.OwnChanges(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	before, after, err := r.OwnTrees(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	files, err := r.DiffFiles(ctx, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0] != (FileStat{Path: "a.txt", Additions: 1, Deletions: 1}) || files[1] != (FileStat{Path: "c.txt", Additions: 1}) {
		t.Errorf("the session's files: %+v", files)
	}
	p, err := r.Patch(ctx, before, after, files[0], Page{})
	if err != nil || !strings.HasSuffix(p.Text, "-a\n+a2\n") {
		t.Errorf("a.txt: %q %v", p.Text, err)
	}
	if _, err := r.MergeBase(ctx, "-x"); err == nil {
		t.Error("an option as a base was taken")
	}
}
