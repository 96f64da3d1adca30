package catalogue

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/protocol"
)

func TestClaudeRows(t *testing.T) {
	projects := t.TempDir()
	work := t.TempDir() // a cwd that exists
	gone := filepath.Join(work, "deleted")

	type want struct {
		title, display, prompt, branch string
		cwdExists                      bool
	}
	cases := []struct {
		name string
		s    corpus.Session
		want want
	}{
		{"no title falls back to the last prompt",
			corpus.Session{Cwd: work, Branch: "main", Prompts: []string{"Fix  the\n flaky test", "again"}},
			want{display: "again", prompt: "Fix the flaky test", branch: "main", cwdExists: true}},
		{"ai-title",
			corpus.Session{Cwd: work, Branch: "dev", Prompts: []string{"p1", "p2"}, AITitle: "Flaky test fix"},
			want{title: "Flaky test fix", display: "Flaky test fix", prompt: "p1", branch: "dev", cwdExists: true}},
		{"the latest title wins",
			corpus.Session{Cwd: work, Branch: "main", Prompts: []string{"p1"}, Summary: "Old summary", AITitle: "Middle", TailTitle: "Newest"},
			want{title: "Newest", display: "Newest", prompt: "p1", branch: "main", cwdExists: true}},
		{"a summary line is outranked by the last prompt",
			corpus.Session{Cwd: work, Branch: "main", Prompts: []string{"p1"}, Summary: "Refactor query script"},
			want{display: "p1", prompt: "p1", branch: "main", cwdExists: true}},
		{"system reminders and meta lines are not prompts",
			corpus.Session{Cwd: gone, Branch: "HEAD", Prompts: []string{"the real prompt"}, Reminder: true, Meta: true},
			want{display: "the real prompt", prompt: "the real prompt", branch: "HEAD"}},
		{"an interrupt is not a prompt",
			corpus.Session{Cwd: work, Branch: "main", Prompts: []string{"only this"}, Interrupt: true},
			want{display: "only this", prompt: "only this", branch: "main", cwdExists: true}},
	}
	for i := range cases {
		cases[i].s.ID = strings.ReplaceAll(cases[i].name, " ", "-")
		cases[i].s.Start = base.Add(time.Duration(i) * time.Hour)
		create(t, projects, &cases[i].s)
	}
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	if n := len(c.Rows()); n != len(cases) {
		t.Fatalf("%d rows, want %d", n, len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := lookup(t, c, providerClaude, tc.s.ID)
			got := want{r.Title, r.DisplayTitle(), r.FirstPrompt, r.Branch, r.CwdExists}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if r.Cwd != tc.s.Cwd {
				t.Errorf("cwd %q, want %q", r.Cwd, tc.s.Cwd)
			}
			if !r.CreatedAt.Equal(tc.s.Start) {
				t.Errorf("createdAt %v, want %v", r.CreatedAt, tc.s.Start)
			}
			if !r.ModifiedAt.After(r.CreatedAt) {
				t.Errorf("modifiedAt %v not after createdAt %v", r.ModifiedAt, r.CreatedAt)
			}
			fi, err := os.Stat(r.Path)
			if err != nil || r.Size != fi.Size() || r.Offset != fi.Size() {
				t.Errorf("size %d offset %d, file %v %v", r.Size, r.Offset, fi.Size(), err)
			}
		})
	}
	// Most recently modified first.
	rows := c.Rows()
	for i := 1; i < len(rows); i++ {
		if Compare(&rows[i-1], &rows[i]) >= 0 {
			t.Errorf("rows %d and %d out of order", i-1, i)
		}
	}
	if rows[0].ID != cases[len(cases)-1].s.ID {
		t.Errorf("first row %s, want the newest", rows[0].ID)
	}
}

func TestSummary(t *testing.T) {
	r := Row{Provider: "claude", ID: "abc", FirstPrompt: "hello", Cwd: "/src/my app",
		CreatedAt: base, ModifiedAt: base.Add(time.Minute)}
	s := r.Summary()
	if s.Resource != "claude:/abc" || s.Provider != "claude" || s.Title != "hello" || s.Status != protocol.StatusIdle {
		t.Errorf("summary %+v", s)
	}
	if s.CreatedAt != "2026-03-01T09:00:00.000Z" || s.ModifiedAt != "2026-03-01T09:01:00.000Z" {
		t.Errorf("times %s %s", s.CreatedAt, s.ModifiedAt)
	}
	if len(s.WorkingDirectories) != 1 || s.WorkingDirectories[0] != "file:///src/my%20app" {
		t.Errorf("working directories %v", s.WorkingDirectories)
	}
	if s.Meta != nil {
		t.Errorf("_meta is the host's, got %v", s.Meta)
	}
	ch := Change{Kind: Changed, Row: r, Fields: FieldTitle | FieldModifiedAt}
	p := ch.Partial()
	if p.Title == nil || *p.Title != "hello" || p.ModifiedAt == nil || p.CreatedAt != nil || p.WorkingDirectories != nil {
		t.Errorf("partial %+v", p)
	}
}

// TestOddFiles covers transcripts that are broken or not conversations.
func TestOddFiles(t *testing.T) {
	projects := t.TempDir()
	dir := filepath.Join(projects, "-src-app")
	good := session("good", "/src/app")
	goodPath := create(t, projects, good)
	data, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")

	// Garbage between good lines, and a last line cut short.
	garbage := "{not json\n\x00\x01\x02\n[1,2,3]\n"
	garbled := lines[0] + garbage + strings.Join(lines[1:6], "") + garbage + strings.Join(lines[6:len(lines)-1], "")
	cutLine := lines[len(lines)-2]
	garbled += cutLine[:len(cutLine)/2]
	writeFile(t, filepath.Join(dir, "garbled.jsonl"), garbled)
	// Empty, a title alone, a subagent's transcript, not a transcript.
	writeFile(t, filepath.Join(dir, "empty.jsonl"), "")
	writeFile(t, filepath.Join(dir, "title-only.jsonl"), `{"type":"ai-title","aiTitle":"Design portfolio page","sessionId":"title-only"}`+"\n")
	writeFile(t, filepath.Join(dir, "agent-a748733.jsonl"), lines[2])
	writeFile(t, filepath.Join(dir, "notes.txt"), lines[2])
	// Unreadable.
	locked := filepath.Join(dir, "locked.jsonl")
	writeFile(t, locked, string(data))
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0

	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	lookup(t, c, providerClaude, "good")
	g := lookup(t, c, providerClaude, "garbled")
	if g.FirstPrompt != good.Prompts[0] || g.Branch != "main" || g.Cwd != "/src/app" {
		t.Errorf("garbled row %+v", g)
	}
	if g.Offset != g.Size-int64(len(cutLine)/2) {
		t.Errorf("offset %d: want the start of the cut line, %d", g.Offset, g.Size-int64(len(cutLine)/2))
	}
	for _, id := range []string{"empty", "title-only", "agent-a748733", "notes"} {
		if _, ok := c.Lookup(providerClaude, id); ok {
			t.Errorf("%s has a row", id)
		}
	}
	st := c.Stats()
	// The head decodes every line until it has what it needs, so it
	// meets the first garbage; the tail decodes only lines that may hold
	// what it lacks, which the cut line does.
	if st.LinesSkipped != 4 {
		t.Errorf("skipped %d lines, want the 3 garbage lines the head met and the cut one", st.LinesSkipped)
	}
	if root {
		// Root reads a file whatever its mode, so the locked file is an
		// ordinary session here; the check needs an ordinary user.
		t.Log("running as root: unreadable-file check skipped")
	} else {
		if _, ok := c.Lookup(providerClaude, "locked"); ok {
			t.Error("unreadable file has a row")
		}
		if st.ReadErrors != 1 {
			t.Errorf("read errors %d, want 1", st.ReadErrors)
		}
	}
	if st.Files != 5 {
		t.Errorf("%d files tracked, want 5 (good, garbled, empty, title-only, locked)", st.Files)
	}
}

// TestHugeFile makes a row from a 50 MB transcript by reading a bounded
// number of bytes from each end.
func TestHugeFile(t *testing.T) {
	projects := t.TempDir()
	s := session("huge", "/src/big")
	s.AITitle, s.TailTitle = "Early title", "Big refactor"
	s.PadTo = 50 << 20
	path := create(t, projects, s)
	if fi, _ := os.Stat(path); fi.Size() < 50<<20-100<<10 {
		t.Fatalf("corpus file is %d bytes", fi.Size())
	}
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	r := lookup(t, c, providerClaude, "huge")
	if r.Title != "Big refactor" || r.FirstPrompt != s.Prompts[0] || r.Cwd != "/src/big" || r.Branch != "main" {
		t.Errorf("row %+v", r)
	}
	if !r.CreatedAt.Equal(base) {
		t.Errorf("createdAt %v", r.CreatedAt)
	}
	// The windows, and the byte before the tail's that says whether its
	// first line starts in it.
	read := c.Stats().BytesRead
	if read > headMax+tailMax+1 {
		t.Errorf("read %d bytes of a %d-byte file, want at most %d", read, r.Size, headMax+tailMax+1)
	}
	t.Logf("read %d bytes of %d", read, r.Size)

	// A title only near the top is found in what the head read anyway.
	projects = t.TempDir()
	early := session("early", "/src/big")
	early.AITitle, early.PadTo = "Early title", 1<<20
	create(t, projects, early)
	c = open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	if r := lookup(t, c, providerClaude, "early"); r.Title != "Early title" {
		t.Errorf("early title %q", r.Title)
	}
	if read := c.Stats().BytesRead; read > headMax+tailMax+1 {
		t.Errorf("read %d bytes", read)
	}
}

// TestCutLines reads rows whose first or last line is longer than a
// window: the head reads the cut first line's leading members, and the
// file's time stands in for the last line's.
func TestCutLines(t *testing.T) {
	projects := t.TempDir()
	dir := filepath.Join(projects, "-src-cut")
	first := `{"parentUuid":null,"isSidechain":false,"cwd":"/src/cut","sessionId":"cut","gitBranch":"topic","type":"user","message":{"role":"user","content":"summarise this"},"toolUseResult":"` +
		corpus.Filler(200<<10) + `","uuid":"u1","timestamp":"2026-03-01T09:00:00.000Z"}` + "\n"
	last := `{"cwd":"/src/cut","gitBranch":"topic","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"` +
		corpus.Filler(300<<10) + `"}]},"uuid":"u2","timestamp":"2026-03-01T10:00:00.000Z"}` + "\n"
	path := filepath.Join(dir, "cut.jsonl")
	writeFile(t, path, first+last)
	mtime := base.Add(2 * time.Hour)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1})
	r := lookup(t, c, providerClaude, "cut")
	if r.Cwd != "/src/cut" || r.Branch != "topic" || r.FirstPrompt != "summarise this" {
		t.Errorf("row %+v", r)
	}
	if !r.ModifiedAt.Equal(mtime) {
		t.Errorf("modifiedAt %v, want the file's %v", r.ModifiedAt, mtime)
	}
	if r.Offset != r.Size {
		t.Errorf("offset %d, size %d", r.Offset, r.Size)
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 300)
	if got := clip(long); len(got) > maxPrompt || !strings.HasPrefix(long, got) {
		t.Errorf("clip kept %d bytes", len(got))
	}
	if got := clip("  a \n\t b  "); got != "a b" {
		t.Errorf("clip = %q", got)
	}
}

// TestReadError makes reads fail as an unreadable file's do: no row, one
// log line however often it is retried, and a row once it reads again.
func TestReadError(t *testing.T) {
	projects := t.TempDir()
	path := create(t, projects, session("denied", "/src/denied"))
	var deny atomic.Bool
	deny.Store(true)
	var logged atomic.Int32
	logger := slog.New(handlerFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "cannot read") {
			logged.Add(1)
		}
	}))
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, Logger: logger, OnChange: ch.on,
		readHook: func(p string) error {
			if deny.Load() && p == path {
				return fs.ErrPermission
			}
			return nil
		}})
	if _, ok := c.Lookup(providerClaude, "denied"); ok {
		t.Fatal("row for an unreadable file")
	}
	ctx := context.Background()
	for range 3 {
		appendFile(t, path, userLine("denied", "/src/denied", "main", "again", base.Add(time.Hour)))
		if err := c.Rescan(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.ReadErrors < 4 || st.Files != 1 || st.Rows != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := logged.Load(); n != 1 {
		t.Errorf("logged %d times", n)
	}
	deny.Store(false)
	if err := c.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	if r := lookup(t, c, providerClaude, "denied"); !r.ModifiedAt.Equal(base.Add(time.Hour)) {
		t.Errorf("row %+v", r)
	}
}

type handlerFunc func(slog.Record)

func (h handlerFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (h handlerFunc) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h handlerFunc) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h handlerFunc) WithGroup(string) slog.Handler                 { return h }

// TestDuplicateID files one session id under two project folders: one
// row, the more recently modified, which the other replaces when it goes.
func TestDuplicateID(t *testing.T) {
	projects := t.TempDir()
	a := session("same", "/src/a")
	b := session("same", "/src/b")
	b.Start = base.Add(time.Hour)
	create(t, projects, a)
	pb := create(t, projects, b)
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on})
	if r := lookup(t, c, providerClaude, "same"); r.Cwd != "/src/b" || len(c.Rows()) != 1 {
		t.Fatalf("row %+v of %d", r, len(c.Rows()))
	}
	if err := os.Remove(pb); err != nil {
		t.Fatal(err)
	}
	got, _ := ch.wait(t, 0, func(x Change) bool { return x.Kind == Changed && x.Row.Cwd == "/src/a" })
	if got.Fields&FieldCwd == 0 {
		t.Errorf("fields %b", got.Fields)
	}
}

// TestNotRegular names a FIFO and a symbolic link like transcripts while
// the catalogue watches: neither is read (opening the FIFO must not wait
// for a writer), and neither has a row.
func TestNotRegular(t *testing.T) {
	projects := t.TempDir()
	real := create(t, projects, session("real", "/src/app"))
	ch := newChanges()
	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: ch.on})
	dir := filepath.Dir(real)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	// Events are handled in order: once this append is reported, the
	// FIFO's and the link's were handled before it.
	appendFile(t, real, userLine("real", "/src/app", "main", "later", base.Add(time.Hour)))
	ch.wait(t, 0, func(x Change) bool { return x.Row.ID == "real" && x.Kind == Changed })
	for _, id := range []string{"fifo", "link"} {
		if r, ok := c.Lookup(providerClaude, id); ok {
			t.Errorf("%s has a row: %+v", id, r)
		}
	}
	if n := len(c.Rows()); n != 1 {
		t.Errorf("%d rows", n)
	}
}
