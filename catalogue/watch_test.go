package catalogue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ahpd/ahpd/internal/testwait"
)

// userLine is a prompt line as the CLI appends it.
func userLine(id, cwd, branch, prompt string, at time.Time) string {
	return fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":"2.1.197","gitBranch":%q,"type":"user","message":{"role":"user","content":%q},"uuid":"u-%d","timestamp":%q}`+"\n",
		cwd, id, branch, prompt, at.UnixNano(), at.Format(time.RFC3339Nano))
}

// TestAppend appends to a transcript and expects the change reported,
// having read the appended bytes and the mark before them, nothing else.
func TestAppend(t *testing.T) {
	projects := t.TempDir()
	s := session("grow", "/src/grow")
	s.PadTo = 4 << 20 // big enough that rereading it would show
	path := create(t, projects, s)
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on})
	before := lookup(t, c, providerClaude, "grow")
	_, pos := ch.wait(t, 0, func(x Change) bool { return x.Kind == Added })
	read0 := c.Stats().BytesRead

	at := base.Add(48 * time.Hour)
	added := userLine("grow", "/src/grow", "feature/x", "one more thing", at) +
		`{"type":"ai-title","aiTitle":"Growing session","sessionId":"grow"}` + "\n"
	start := time.Now()
	appendFile(t, path, added)
	got, _ := ch.wait(t, pos, func(x Change) bool { return x.Kind == Changed && x.Row.ID == "grow" })
	t.Logf("append reported after %v", time.Since(start))

	if got.Fields != FieldTitle|FieldModifiedAt|FieldBranch {
		t.Errorf("fields %b", got.Fields)
	}
	r := got.Row
	if r.Title != "Growing session" || !r.ModifiedAt.Equal(at) || r.Branch != "feature/x" || r.FirstPrompt != before.FirstPrompt {
		t.Errorf("row after append %+v", r)
	}
	if r.Size != before.Size+int64(len(added)) || r.Offset != r.Size {
		t.Errorf("size %d offset %d, want %d", r.Size, r.Offset, before.Size+int64(len(added)))
	}
	// The appended bytes, and those before them that show the file was
	// appended to, not rewritten.
	if read := c.Stats().BytesRead - read0; read != int64(len(added))+markLen {
		t.Errorf("read %d bytes for an append of %d", read, len(added))
	}
	if rows := c.Rows(); rows[0].Title != "Growing session" {
		t.Errorf("snapshot not updated: %+v", rows[0])
	}
}

// TestDebounce appends in a burst and expects few reports, the last of
// which holds the final state.
func TestDebounce(t *testing.T) {
	projects := t.TempDir()
	path := create(t, projects, session("burst", "/src/burst"))
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on, Debounce: 100 * time.Millisecond})
	_, pos := ch.wait(t, 0, func(x Change) bool { return x.Kind == Added })
	batches := ch.batches()
	for i := range 100 {
		appendFile(t, path, userLine("burst", "/src/burst", "main", fmt.Sprint("step ", i), base.Add(time.Duration(i+1)*time.Hour)))
	}
	final := base.Add(100 * time.Hour)
	ch.wait(t, pos, func(x Change) bool { return x.Kind == Changed && x.Row.ModifiedAt.Equal(final) })
	if n := ch.batches() - batches; n > 10 {
		t.Errorf("%d reports for a burst of 100 appends", n)
	}
	if r := lookup(t, c, providerClaude, "burst"); !r.ModifiedAt.Equal(final) {
		t.Errorf("modifiedAt %v, want %v", r.ModifiedAt, final)
	}
}

// TestNewFolder makes a project folder and a transcript in it at once:
// the folder is watched, then listed, so the file is found either way.
func TestNewFolderAndRemove(t *testing.T) {
	projects := t.TempDir()
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on})
	if len(c.Rows()) != 0 {
		t.Fatal("rows in an empty folder")
	}
	s := session("fresh", "/src/fresh")
	path := create(t, projects, s)
	_, pos := ch.wait(t, 0, func(x Change) bool { return x.Kind == Added && x.Row.ID == "fresh" })

	// A second file in the now-watched folder, written line by line.
	p2 := filepath.Join(filepath.Dir(path), "second.jsonl")
	writeFile(t, p2, "")
	appendFile(t, p2, userLine("second", "/src/fresh", "main", "hello", base))
	_, pos = ch.wait(t, pos, func(x Change) bool { return x.Kind == Added && x.Row.ID == "second" })

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, pos = ch.wait(t, pos, func(x Change) bool { return x.Kind == Removed && x.Row.ID == "fresh" })
	if _, ok := c.Lookup(providerClaude, "fresh"); ok {
		t.Error("removed row still looked up")
	}
	// Removing the folder removes what is left in it.
	if err := os.RemoveAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, pos, func(x Change) bool { return x.Kind == Removed && x.Row.ID == "second" })
	if n := len(c.Rows()); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

// TestOverflow loses events on purpose (the folder's watch is removed),
// then reports an overflow as the watcher would: the rescan finds the
// change and renews the watch.
func TestOverflow(t *testing.T) {
	projects := t.TempDir()
	path := create(t, projects, session("lost", "/src/lost"))
	dir := filepath.Dir(path)
	ch := newChanges()
	events := make(chan string, 16)
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on,
		eventHook: func(path string) { events <- path }})
	_, pos := ch.wait(t, 0, func(x Change) bool { return x.Kind == Added })
	ctx := context.Background()
	if err := c.do(ctx, func() { c.watcher.Remove(dir) }); err != nil {
		t.Fatal(err)
	}
	at := base.Add(24 * time.Hour)
	appendFile(t, path, userLine("lost", "/src/lost", "main", "unseen", at))
	// No event comes for it. A file made in the watched projects folder
	// after it is an event that inotify delivers after any the append
	// made; once the loop has handled it, whatever it marked is published.
	if err := os.WriteFile(filepath.Join(projects, "sentinel"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventFor(t, events, filepath.Join(projects, "sentinel"))
	if err := c.do(ctx, c.publish); err != nil {
		t.Fatal(err)
	}
	if r := lookup(t, c, providerClaude, "lost"); r.ModifiedAt.Equal(at) {
		t.Fatal("change seen without a watch")
	}
	if err := c.do(ctx, func() { c.watchError(c.ctx, fsnotify.ErrEventOverflow) }); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, pos, func(x Change) bool { return x.Kind == Changed && x.Row.ModifiedAt.Equal(at) })
	if st := c.Stats(); st.Overflows != 1 || st.Rescans != 2 {
		t.Errorf("stats %+v", st)
	}
	// The watch is back: the next append is an event again.
	at2 := at.Add(time.Hour)
	appendFile(t, path, userLine("lost", "/src/lost", "main", "seen", at2))
	ch.wait(t, pos, func(x Change) bool { return x.Kind == Changed && x.Row.ModifiedAt.Equal(at2) })
}

// eventFor waits until the catalogue has handled an event for path.
func eventFor(t *testing.T, events <-chan string, path string) {
	t.Helper()
	timeout := time.After(testwait.Hang)
	for {
		select {
		case p := <-events:
			if p == path {
				return
			}
		case <-timeout:
			t.Fatalf("no event for %s", path)
		}
	}
}

// TestLightRescan catches a change no event announced, and a cwd that
// went away.
func TestLightRescan(t *testing.T) {
	projects := t.TempDir()
	cwd := t.TempDir()
	path := create(t, projects, session("quiet", cwd))
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: 50 * time.Millisecond, OnChange: ch.on})
	if !lookup(t, c, providerClaude, "quiet").CwdExists {
		t.Fatal("cwd should exist")
	}
	ctx := context.Background()
	c.do(ctx, func() { c.watcher.Remove(filepath.Dir(path)); c.watcher.Remove(projects) })
	at := base.Add(time.Hour * 5)
	appendFile(t, path, userLine("quiet", cwd, "main", "psst", at))
	ch.wait(t, 0, func(x Change) bool { return x.Kind == Changed && x.Row.ModifiedAt.Equal(at) })
	if err := os.Remove(cwd); err != nil {
		t.Fatal(err)
	}
	got, _ := ch.wait(t, 0, func(x Change) bool { return x.Kind == Changed && x.Fields&FieldCwd != 0 })
	if got.Row.CwdExists {
		t.Error("cwd still exists")
	}
}

// TestRowsDuringScan reads rows while a scan is held up in its reads:
// the reader gets the last snapshot at once.
func TestRowsDuringScan(t *testing.T) {
	projects := t.TempDir()
	const n = 20
	var paths []string
	for i := range n {
		s := session(fmt.Sprint("s", i), fmt.Sprint("/src/p", i%3))
		s.Start = base.Add(time.Duration(i) * time.Minute)
		paths = append(paths, create(t, projects, s))
	}
	// While a hold is set, every read says so (once) and waits for its
	// gate to close.
	type hold struct{ reading, gate chan struct{} }
	newHold := func() *hold { return &hold{make(chan struct{}, 1), make(chan struct{})} }
	var held atomic.Pointer[hold]
	hook := func(string) error {
		if h := held.Load(); h != nil {
			select {
			case h.reading <- struct{}{}:
			default:
			}
			<-h.gate
		}
		return nil
	}
	first := newHold()
	held.Store(first)
	c := Open(Config{Roots: claudeAt(projects), RescanInterval: -1, Workers: 1, readHook: hook})
	defer c.Close()

	// Before the first scan ends: an empty snapshot, at once.
	<-first.reading
	worst := readWhileHeld(t, c, c.Ready(), 0)
	held.Store(nil)
	close(first.gate)
	<-c.Ready()
	if len(c.Rows()) != n {
		t.Fatalf("%d rows after the first scan", len(c.Rows()))
	}
	t.Logf("slowest Rows() during the first scan: %v", worst)

	// A rescan of changed files: the old snapshot, at once. No watch is
	// left, so that events do not read the files before the rescan does.
	c.do(context.Background(), func() {
		for dir := range c.watched {
			c.unwatch(dir)
		}
	})
	for _, p := range paths {
		appendFile(t, p, userLine("x", "/src/x", "main", "more", base.Add(time.Hour)))
	}
	second := newHold()
	held.Store(second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Rescan(context.Background())
	}()
	<-second.reading
	worst = readWhileHeld(t, c, done, n)
	close(second.gate)
	<-done
	t.Logf("slowest Rows() during a rescan: %v", worst)
}

// readWhileHeld calls Rows and Lookup while a scan is held up in a read,
// checking each call returns, which it could not if it waited for the
// scan (the hold lasts until the test lets it go), and sees want rows (or,
// for want 0, any published count), and that the scan did not end
// meanwhile (done). It returns the slowest call, for the log: how quick
// is the machine's to say.
func readWhileHeld(t *testing.T, c *Catalogue, done <-chan struct{}, want int) time.Duration {
	t.Helper()
	var worst time.Duration
	for range 20 {
		start := time.Now()
		returned := make(chan []Row, 1)
		go func() {
			rows := c.Rows()
			_, _ = c.Lookup(providerClaude, "s1")
			returned <- rows
		}()
		var rows []Row
		select {
		case rows = <-returned:
		case <-time.After(testwait.Hang):
			t.Fatal("Rows waits for the scan held up in a read")
		}
		worst = max(worst, time.Since(start))
		if want > 0 && len(rows) != want {
			t.Errorf("%d rows during the rescan, want the old %d", len(rows), want)
		}
	}
	select {
	case <-done:
		t.Error("the scan ended while it was held up")
	default:
	}
	return worst
}

// TestScriptRows reads the script backend's transcripts.
func TestScriptRows(t *testing.T) {
	dir := t.TempDir()
	ch := newChanges()
	writeFile(t, filepath.Join(dir, "conv-1.jsonl"),
		scriptLine(1, "say hello", base, 1500)+scriptLine(2, "write a file", base.Add(time.Minute), 250))
	writeFile(t, filepath.Join(dir, "conv-2.jsonl"), scriptLine(1, "fail", base.Add(time.Hour), 10)[:40])
	c := open(t, Config{Roots: scriptAt(dir), RescanInterval: -1, OnChange: ch.on})
	r := lookup(t, c, providerScript, "conv-1")
	if r.FirstPrompt != "say hello" || r.Cwd != "" || !r.CreatedAt.Equal(base) ||
		!r.ModifiedAt.Equal(base.Add(time.Minute+250*time.Millisecond)) {
		t.Errorf("row %+v", r)
	}
	if r.Summary().Resource != "script:/conv-1" {
		t.Errorf("resource %s", r.Summary().Resource)
	}
	// A record cut short is no turn yet: no row until it is whole.
	if _, ok := c.Lookup(providerScript, "conv-2"); ok {
		t.Error("row for a cut record")
	}
	appendFile(t, filepath.Join(dir, "conv-2.jsonl"), scriptLine(1, "fail", base.Add(time.Hour), 10)[40:])
	got, _ := ch.wait(t, 0, func(x Change) bool { return x.Kind == Added && x.Row.ID == "conv-2" })
	if got.Row.FirstPrompt != "fail" {
		t.Errorf("row %+v", got.Row)
	}
}

func scriptLine(seq int, text string, at time.Time, ms float64) string {
	return fmt.Sprintf(`{"seq":%d,"turn":{"id":"turn-%d","startedAt":%q,"duration":%v,"message":{"text":%q,"origin":{"kind":"user"}},"responseParts":[{"kind":"markdown","id":"part-1","content":"ok"}],"state":"complete"}}`+"\n",
		seq, seq, at.Format("2006-01-02T15:04:05.000Z"), ms, text)
}
