package catalogue

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// indexFixture writes n transcripts of various sizes and titles.
func indexFixture(t *testing.T, n int) (projects string, paths []string) {
	projects = t.TempDir()
	for i := range n {
		s := session(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), fmt.Sprintf("/src/p%d", i%3))
		s.Start = base.Add(time.Duration(i) * time.Minute)
		s.PadTo = int64(i%4) * 100 << 10
		s.FirstTurn = 12 << 10
		if i%2 == 0 {
			s.AITitle = fmt.Sprintf("Title %d", i)
		}
		paths = append(paths, create(t, projects, s))
	}
	return projects, paths
}

// fresh returns the rows a catalogue with no index makes of projects: what
// a catalogue started from an index must show.
func fresh(t *testing.T, projects string) []Row {
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	defer c.Close()
	return slices.Clone(c.Rows())
}

func sameRows(t *testing.T, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestIndexUnchanged starts twice on the same transcripts: the second
// start reads nothing and shows the same rows.
func TestIndexUnchanged(t *testing.T) {
	projects, paths := indexFixture(t, 12)
	index := filepath.Join(t.TempDir(), "state", "catalogue-index.json")
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	first := slices.Clone(c.Rows())
	c.Close() // the first scan's save is over once the loop is
	if st := c.Stats(); st.IndexSaves != 1 || st.IndexHits != 0 {
		t.Errorf("first start: %+v", st)
	}

	c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	st := c.Stats()
	if st.BytesRead != 0 || st.IndexHits != int64(len(paths)) {
		t.Errorf("second start read %d bytes, %d rows from the index of %d", st.BytesRead, st.IndexHits, len(paths))
	}
	sameRows(t, c.Rows(), first)
	c.Close()
	if st := c.Stats(); st.IndexSaves != 0 {
		t.Errorf("an unchanged index was saved again (%d)", st.IndexSaves)
	}
	// The temporary file is gone: only the index is left.
	entries, err := os.ReadDir(filepath.Dir(index))
	if err != nil || len(entries) != 1 {
		t.Errorf("state folder holds %v (%v)", entries, err)
	}
}

// TestIndexNeverStale changes transcripts while no catalogue runs, in
// every way a stat can and cannot tell, and expects the rows a catalogue
// with no index makes.
func TestIndexNeverStale(t *testing.T) {
	projects, paths := indexFixture(t, 8)
	index := filepath.Join(t.TempDir(), "catalogue-index.json")
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	c.Close()

	// Appended to: read from where the last read stopped.
	added := userLine("00000000-0000-4000-8000-000000000001", "/src/p1", "next", "one more", base.Add(time.Hour))
	appendFile(t, paths[1], added)
	// Rewritten with the same size and modification time: a different
	// title of the same length, which only the change time reveals.
	rewrite(t, paths[2], "Title 2", "Eltit 2")
	// Rewritten larger in place.
	rewrite(t, paths[4], "Title 4", "Title 4 renamed")
	// Removed, and replaced by another file under the same name.
	if err := os.Remove(paths[3]); err != nil {
		t.Fatal(err)
	}
	s := session("00000000-0000-4000-8000-000000000005", "/src/p2")
	s.AITitle = "Replaced"
	if err := os.Remove(paths[5]); err != nil {
		t.Fatal(err)
	}
	create(t, projects, s)
	// A new one.
	create(t, projects, session("00000000-0000-4000-8000-000000000099", "/src/new"))

	want := fresh(t, projects)
	c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	sameRows(t, c.Rows(), want)
	st := c.Stats()
	if st.IndexHits != 3 {
		t.Errorf("%d rows from the index, want the 3 files left as they were", st.IndexHits)
	}
	if r := lookup(t, c, providerClaude, "00000000-0000-4000-8000-000000000002"); r.Title != "Eltit 2" {
		t.Errorf("rewritten file's title %q", r.Title)
	}
	c.Close()

	// And the index saved then is as good.
	c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	sameRows(t, c.Rows(), want)
	if st := c.Stats(); st.BytesRead != 0 {
		t.Errorf("read %d bytes after a saved index", st.BytesRead)
	}
}

// rewrite replaces old by new in the file at path, in place (same inode),
// and puts its modification time back.
func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s holds no %q", path, old)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.ReplaceAll(string(data), old, new)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestIndexUnusable starts from an index that does not decode, one made
// for another folder and one of another version: each is ignored, every
// transcript is read, and a good index replaces it.
func TestIndexUnusable(t *testing.T) {
	projects, paths := indexFixture(t, 4)
	want := fresh(t, projects)
	for _, tc := range []struct {
		name string
		data func(good []byte) string
	}{
		{"garbage", func([]byte) string { return "{not an index" }},
		{"cut short", func(good []byte) string { return string(good[:len(good)/2]) }},
		{"another folder", func(good []byte) string {
			return strings.Replace(string(good), `"claude":"`, `"claude":"/elsewhere`, 1)
		}},
		{"another version", func(good []byte) string {
			return strings.Replace(string(good), fmt.Sprintf(`"version":%d`, indexVersion), `"version":0`, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			index := filepath.Join(t.TempDir(), "catalogue-index.json")
			c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
			c.Close()
			good, err := os.ReadFile(index)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, index, tc.data(good))
			c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
			sameRows(t, c.Rows(), want)
			c.Close()
			if st := c.Stats(); st.IndexHits != 0 || st.IndexSaves != 1 {
				t.Errorf("stats %+v", st)
			}
			c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
			if st := c.Stats(); st.IndexHits != int64(len(paths)) {
				t.Errorf("the index saved after is not used: %+v", st)
			}
		})
	}
}

// TestIndexFollowsChanges saves what the watcher brought in: a session
// that grew while the catalogue ran starts from the index with its new
// row, reading nothing.
func TestIndexFollowsChanges(t *testing.T) {
	projects, paths := indexFixture(t, 3)
	index := filepath.Join(t.TempDir(), "catalogue-index.json")
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index, OnChange: ch.on})
	id := "00000000-0000-4000-8000-000000000001"
	appendFile(t, paths[1], `{"type":"custom-title","customTitle":"Renamed","sessionId":"`+id+`"}`+"\n")
	ch.wait(t, 0, func(x Change) bool { return x.Row.ID == id && x.Row.Title == "Renamed" })
	c.Close()

	c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	if r := lookup(t, c, providerClaude, id); r.Title != "Renamed" {
		t.Errorf("title %q", r.Title)
	}
	if st := c.Stats(); st.BytesRead != 0 {
		t.Errorf("read %d bytes", st.BytesRead)
	}
	sameRows(t, c.Rows(), fresh(t, projects))
}
