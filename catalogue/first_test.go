package catalogue

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// pageFixture writes n transcripts an hour apart, the newest first in
// ids, each file's mtime after its last line, as the CLI leaves them.
func pageFixture(t *testing.T, n int) (projects string, ids []string, paths map[string]string) {
	t.Helper()
	projects = t.TempDir()
	paths = map[string]string{}
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		s := session(id, fmt.Sprintf("/src/app%d", i%3))
		s.Start = base.Add(time.Duration(i) * time.Hour)
		path := create(t, projects, s)
		mtime := s.Start.Add(30 * time.Minute) // the lines span seconds
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		paths[id] = path
	}
	slices.Reverse(ids)
	return projects, ids, paths
}

// held makes a readHook that holds every read but those of free until
// release is closed.
func held(free map[string]bool, release chan struct{}) func(string) error {
	return func(path string) error {
		if free[path] {
			return nil
		}
		select {
		case <-release:
		case <-time.After(testwait.Hang):
		}
		return nil
	}
}

// waitClosed fails the test unless ch is closed within testwait.Hang.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testwait.Hang):
		t.Fatalf("%s did not come", what)
	}
}

// The first page is published from the newest files alone, while the
// older ones are still unread, and it is the whole scan's first page.
func TestFirstPageFirst(t *testing.T) {
	projects, ids, paths := pageFixture(t, 40)
	free := map[string]bool{}
	for _, id := range ids[:10] {
		free[paths[id]] = true
	}
	release := make(chan struct{})
	ch := newChanges()
	c := Open(Config{Roots: claudeAt(projects), RescanInterval: -1, FirstPage: 10, OnChange: ch.on,
		readHook: held(free, release)})
	t.Cleanup(func() { c.Close() })

	waitClosed(t, c.FirstPage(), "the first page")
	select {
	case <-c.Ready():
		t.Fatal("Ready before the older files were read")
	default:
	}
	rows := c.Rows()
	var got []string
	for i := range rows {
		got = append(got, rows[i].ID)
	}
	if !slices.Equal(got, ids[:10]) {
		t.Fatalf("first page %v, want the newest %v", got, ids[:10])
	}
	if n := c.Stats().FirstPageReads; n != 10 {
		t.Errorf("FirstPageReads = %d, want 10", n)
	}
	if n := ch.len(); n != 10 {
		t.Errorf("%d changes reported with the first page, want its 10 rows", n)
	}

	close(release)
	waitClosed(t, c.Ready(), "the whole scan")
	rows = c.Rows()
	got = got[:0]
	for i := range rows {
		got = append(got, rows[i].ID)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("rows %v, want %v", got, ids)
	}
	ch.wait(t, 0, func(x Change) bool { return x.Kind == Added && x.Row.ID == ids[len(ids)-1] })
}

// A transcript whose lines are dated after its file's modification time
// (a clock set wrong, a copy whose times were set back) is read with the
// older files: the first page misses it, and it is added with the rest.
func TestFirstPageSkewedClock(t *testing.T) {
	projects, ids, paths := pageFixture(t, 20)
	skewed := ids[0]
	old := base.Add(-time.Hour)
	if err := os.Chtimes(paths[skewed], old, old); err != nil {
		t.Fatal(err)
	}
	free := map[string]bool{}
	for _, id := range ids[1:6] {
		free[paths[id]] = true
	}
	release := make(chan struct{})
	ch := newChanges()
	c := Open(Config{Roots: claudeAt(projects), RescanInterval: -1, FirstPage: 5, OnChange: ch.on,
		readHook: held(free, release)})
	t.Cleanup(func() { c.Close() })

	waitClosed(t, c.FirstPage(), "the first page")
	if _, ok := c.Lookup(providerClaude, skewed); ok {
		t.Fatal("the first page holds a file that was not free to read")
	}
	if rows := c.Rows(); len(rows) != 5 || rows[0].ID != ids[1] {
		t.Fatalf("first page %v, want 5 rows from %s", rows, ids[1])
	}
	close(release)
	waitClosed(t, c.Ready(), "the whole scan")
	if rows := c.Rows(); len(rows) != len(ids) || rows[0].ID != skewed {
		t.Fatalf("rows %v, want %d, first %s", rows, len(ids), skewed)
	}
	ch.wait(t, 5, func(x Change) bool { return x.Kind == Added && x.Row.ID == skewed })
}

// With every row in the index, the first page is the whole scan and
// reads nothing.
func TestFirstPageFromIndex(t *testing.T) {
	projects, ids, _ := pageFixture(t, 12)
	index := filepath.Join(t.TempDir(), "index.json")
	cfg := Config{Roots: claudeAt(projects), RescanInterval: -1, FirstPage: 5, IndexPath: index}
	c := open(t, cfg)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = Open(cfg)
	t.Cleanup(func() { c.Close() })
	waitClosed(t, c.FirstPage(), "the first page")
	if rows := c.Rows(); len(rows) != len(ids) {
		t.Fatalf("%d rows on the first page from the index, want all %d", len(rows), len(ids))
	}
	if st := c.Stats(); st.FirstPageReads != 0 || st.IndexHits != int64(len(ids)) {
		t.Errorf("FirstPageReads %d, IndexHits %d; want 0 and %d", st.FirstPageReads, st.IndexHits, len(ids))
	}
}
