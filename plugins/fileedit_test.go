package plugins_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

func TestLineChanges(t *testing.T) {
	many := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(prefix)
			b.WriteString(strings.Repeat("x", i%7))
			b.WriteString("\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name           string
		a, b           string
		added, removed int64
	}{
		{"created", "", "one\ntwo\n", 2, 0},
		{"created without a last newline", "", "one\ntwo", 2, 0},
		{"emptied", "one\ntwo\n", "", 0, 2},
		{"the same", "one\ntwo\n", "one\ntwo\n", 0, 0},
		{"a line changed", "one\ntwo\nthree\n", "one\nTWO\nthree\n", 1, 1},
		{"a line added in the middle", "one\nthree\n", "one\ntwo\nthree\n", 1, 0},
		{"lines moved", "a\nb\nc\nd\n", "b\nc\nd\na\n", 1, 1},
		{"a newline added to the last line", "one\ntwo", "one\ntwo\n", 1, 1},
		{"interleaved", "a\nx\nb\ny\nc\n", "a\nb\nc\nz\n", 1, 2},
		// Past the bound on the diff's work, the lines between the common
		// start and end all count.
		{"too different to diff", "head\n" + many("a", 5000) + "tail\n", "head\n" + many("b", 5000) + "tail\n", 5000, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, removed := plugins.LineChanges([]byte(tc.a), []byte(tc.b))
			if added != tc.added || removed != tc.removed {
				t.Errorf("+%d -%d, want +%d -%d", added, removed, tc.added, tc.removed)
			}
		})
	}
}

// TestFileEdit checks the fileEdit content of a file created, edited and
// too big to read, against the schema too.
func TestFileEdit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	uri := plugins.FileURI(path)
	check := func(fe *protocol.ToolResultFileEditContent) {
		t.Helper()
		protocoltest.Validate(t, "ToolResultContent", fe)
	}

	missing := plugins.ReadFileVersion(path)
	if missing.Exists {
		t.Fatalf("a missing file reads as %+v", missing)
	}
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := plugins.FileEdit(path, missing, plugins.ReadFileVersion(path))
	check(created)
	if created.Before != nil || created.After == nil || created.After.URI != uri || created.After.Content.URI != uri ||
		*created.Diff.Added != 2 || *created.Diff.Removed != 0 {
		t.Errorf("created: %+v", created)
	}

	before := plugins.ReadFileVersion(path)
	edited := plugins.FileEdit(path, before, plugins.VersionOf([]byte("one\n2\n")))
	check(edited)
	want := "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte("one\ntwo\n"))
	if edited.Before == nil || edited.Before.URI != uri || edited.Before.Content.URI != want || *edited.Before.Content.SizeHint != 8 ||
		*edited.Diff.Added != 1 || *edited.Diff.Removed != 1 {
		t.Errorf("edited: %+v", edited)
	}

	// Past MaxEditCarried the old content is not carried; past
	// MaxEditRead nothing is read, and no stats are told.
	big := strings.Repeat("line\n", plugins.MaxEditCarried/5+1)
	carried := plugins.FileEdit(path, plugins.VersionOf([]byte(big)), plugins.VersionOf([]byte(big+"more\n")))
	check(carried)
	if carried.Before.Content.URI != uri || *carried.Diff.Added != 1 || *carried.Diff.Removed != 0 {
		t.Errorf("a file over MaxEditCarried: %+v", carried)
	}
	if err := os.WriteFile(path, make([]byte, plugins.MaxEditRead+1), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := plugins.ReadFileVersion(path)
	if !huge.Exists || huge.Data != nil || huge.Size != plugins.MaxEditRead+1 {
		t.Errorf("a file over MaxEditRead reads as Exists %v, %d bytes of data, size %d", huge.Exists, len(huge.Data), huge.Size)
	}
	unread := plugins.FileEdit(path, before, huge)
	check(unread)
	if unread.Diff != nil || unread.Before == nil || unread.After == nil {
		t.Errorf("an edit to a file too big to read: %+v", unread)
	}
}
