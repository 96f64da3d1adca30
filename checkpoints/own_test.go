package checkpoints

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// ownSession plays a session's side of the checkpoints as the host does:
// turn/0 when it starts, a snapshot as each turn starts (recorded as the
// turn's start only when the folder changed since the session's latest
// checkpoint), and the turn's checkpoint after the start when it ends. It
// keeps its Own up to date turn by turn, as the host does.
type ownSession struct {
	tb       testing.TB
	r        *Repo
	id       string
	next     int    // the turn the next checkpoint records
	last     string // the latest checkpoint's commit
	lastTree string // and its tree
	start    string // the open turn's start commit, "" for last
	open     bool   // a turn started and got no checkpoint yet
	own      Own
}

func newOwnSession(tb testing.TB, r *Repo, id string) *ownSession {
	tb.Helper()
	s := &ownSession{tb: tb, r: r, id: id}
	tree, err := r.Snapshot(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if s.last, err = r.RecordAfter(context.Background(), id, 0, tree, ""); err != nil {
		tb.Fatal(err)
	}
	s.lastTree, s.next = tree, 1
	return s
}

// begin starts a turn; a turn that starts while one is open (cancelled,
// or of another chat) starts from the open one's start.
func (s *ownSession) begin() {
	s.tb.Helper()
	if s.open {
		return
	}
	s.open, s.start = true, ""
	ctx := context.Background()
	tree, err := s.r.Snapshot(ctx)
	if err != nil {
		s.tb.Fatal(err)
	}
	if tree == s.lastTree {
		return
	}
	if s.start, err = s.r.RecordStart(ctx, s.id, s.next, tree, s.last); err != nil {
		s.tb.Fatal(err)
	}
}

// end records the open turn's checkpoint.
func (s *ownSession) end() {
	s.tb.Helper()
	ctx := context.Background()
	tree, err := s.r.Snapshot(ctx)
	if err != nil {
		s.tb.Fatal(err)
	}
	parent := s.last
	if s.start != "" {
		parent = s.start
	}
	commit, err := s.r.RecordAfter(ctx, s.id, s.next, tree, parent)
	if err != nil {
		s.tb.Fatal(err)
	}
	turns, err := s.r.TurnChanges(ctx, []string{commit})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.own.Add(turns[0])
	s.last, s.lastTree, s.start, s.open = commit, tree, "", false
	s.next++
}

// TestOwnChanges checks that a session's counts are what changed during
// its own turns, combined file by file, whatever else changed in the
// folder between them; read turn by turn (Own) and all at once after a
// restart (SessionChanges), they agree.
func TestOwnChanges(t *testing.T) {
	t.Parallel()
	// Steps: "s+" a turn of the session starts, "s-" it ends, "s+-" both;
	// "w path content" and "rm path" change the folder (inside a turn of
	// the session, the session's doing; outside, somebody else's).
	cases := []struct {
		name  string
		steps []string
		want  Stats
	}{
		{"a turn that changes nothing", []string{"s+-"}, Stats{}},
		{"another's edit between turns", []string{"s+-", "w other.txt o", "s+-"}, Stats{}},
		{"another's edit before the first turn", []string{"w other.txt o", "s+-"}, Stats{}},
		{"a new file", []string{"s+", "w new.txt 1\n2", "s-"}, Stats{Files: 1, Additions: 2}},
		{"a new file, another's beside it", []string{"s+", "w new.txt 1", "s-", "w other.txt o", "s+-"}, Stats{Files: 1, Additions: 1}},
		{"one file in two turns counts its net change", []string{
			"s+", "w a.txt 1\nX\n3", "s-", "s+", "w a.txt 1\nY\n3", "s-",
		}, Stats{Files: 1, Additions: 1, Deletions: 1}},
		{"a file changed and changed back", []string{
			"s+", "w a.txt 1\nX\n3", "s-", "s+", "w a.txt 1\n2\n3", "s-",
		}, Stats{}},
		// A file counts from before my first turn that changed it to
		// after my last: what another did to it in between is in that.
		{"another's edit to my file between my turns is in its net change", []string{
			"s+", "w a.txt 1\nX\n3", "s-", "w a.txt 1\nX\nO", "s+", "w a.txt 1\nY\nO", "s-",
		}, Stats{Files: 1, Additions: 2, Deletions: 2}},
		{"another's edit to a file before I touch it is not mine", []string{
			"s+-", "w a.txt O\n2\n3", "s+", "w a.txt O\n2\nX", "s-",
		}, Stats{Files: 1, Additions: 1, Deletions: 1}},
		{"another's edit during my turn is mine", []string{
			"s+", "w other.txt o", "s-",
		}, Stats{Files: 1, Additions: 1}},
		{"a deletion", []string{"s+", "rm b.txt", "s-"}, Stats{Files: 1, Deletions: 1}},
		{"a rename in one turn is one file", []string{
			"s+", "rm b.txt", "w moved.txt b", "s-",
		}, Stats{Files: 1}},
		{"a rename over two turns is one file", []string{
			"s+", "rm b.txt", "s-", "s+", "w moved.txt b", "s-",
		}, Stats{Files: 1}},
		{"a cancelled turn's edits count in the next", []string{
			"s+", "w c.txt c", "s+", "w d.txt d", "s-",
		}, Stats{Files: 2, Additions: 2}},
		{"a file another deleted and I made again", []string{
			"rm b.txt", "s+", "w b.txt new\nlines", "s-",
		}, Stats{Files: 1, Additions: 2}},
		{"a file made a folder", []string{
			"s+", "rm b.txt", "w b.txt/inner x", "s-",
		}, Stats{Files: 2, Additions: 1, Deletions: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
			r := open(t, dir)
			s := newOwnSession(t, r, "s")
			for _, step := range tc.steps {
				switch f := strings.SplitN(step, " ", 3); f[0] {
				case "s+":
					s.begin()
				case "s-":
					s.end()
				case "s+-":
					s.begin()
					s.end()
				case "w":
					write(t, dir, f[1], f[2]+"\n")
				case "rm":
					remove(t, dir, f[1])
				default:
					t.Fatalf("step %q", step)
				}
			}
			got, err := r.Count(ctx, &s.own)
			if err != nil || got != tc.want {
				t.Errorf("turn by turn: %+v, %v; want %+v", got, err, tc.want)
			}
			// Counting again costs nothing and says the same.
			if again, err := r.Count(ctx, &s.own); err != nil || again != got {
				t.Errorf("counted again: %+v, %v", again, err)
			}
			if got, err := r.SessionChanges(ctx, "s"); err != nil || got != tc.want {
				t.Errorf("read from the checkpoints: %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestOwnChangesTwoSessions runs the case: two sessions in one
// folder, one writing a file and one only talking, their turns taking
// turns; the first counts its file, the second nothing. A third, whose
// turn overlaps the first's, counts the file too: what changes in the
// folder during a turn is the turn's.
func TestOwnChangesTwoSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"README.md": "hello\n"})
	r := open(t, dir)
	writer, talker, overlapping := newOwnSession(t, r, "writer"), newOwnSession(t, r, "talker"), newOwnSession(t, r, "overlapping")
	talker.begin()
	talker.end()
	overlapping.begin()
	writer.begin()
	write(t, dir, "claude.txt", "hello\n")
	writer.end()
	overlapping.end()
	talker.begin()
	talker.end()
	for _, c := range []struct {
		s    *ownSession
		want Stats
	}{
		{writer, Stats{Files: 1, Additions: 1}},
		{talker, Stats{}},
		{overlapping, Stats{Files: 1, Additions: 1}},
	} {
		if got, err := r.SessionChanges(ctx, c.s.id); err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.s.id, got, err, c.want)
		}
	}
	// The folder against the talker's first checkpoint, as counts were
	// read before, holds the writer's file.
	cps, err := r.Checkpoints(ctx, "talker")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Diff(ctx, cps[0].Commit, cps[len(cps)-1].Commit); err != nil || st.Files != 1 {
		t.Errorf("the talker's first against its last: %+v, %v", st, err)
	}
	// Its second turn started after the write: that start is recorded,
	// and its turn follows it.
	start := run(t, dir, "rev-parse", RefPrefix("talker")+"start/2")
	if got := run(t, dir, "rev-parse", RefPrefix("talker")+"turn/2^"); got != start {
		t.Errorf("turn 2 follows %s, want its start %s", got, start)
	}
	// Its first did not: the folder had not changed since turn 0.
	if _, err := runErr(dir, "rev-parse", "--verify", "-q", RefPrefix("talker")+"start/1"); err == nil {
		t.Error("a start was recorded for a turn that started where the last ended")
	}
}

// TestRecordFollowsStart checks Record and Capture, which look the parent
// up, take a turn's start when it has one: after a restart the host no
// longer knows it.
func TestRecordFollowsStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n"})
	r := open(t, dir)
	c0, err := r.Capture(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "other.txt", "o\n")
	tree, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start, err := r.RecordStart(ctx, "s", 1, tree, "") // the parent looked up
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", start+"^"); got != c0 {
		t.Errorf("the start follows %s, want turn 0 %s", got, c0)
	}
	write(t, dir, "mine.txt", "m\n")
	end, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := r.Record(ctx, "s", 1, end)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", c1+"^"); got != start {
		t.Errorf("turn 1 follows %s, want its start %s", got, start)
	}
	// Turn 2 has no start: it follows turn 1.
	c2, err := r.Capture(ctx, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", c2+"^"); got != c1 {
		t.Errorf("turn 2 follows %s, want turn 1 %s", got, c1)
	}
	if st, err := r.SessionChanges(ctx, "s"); err != nil || st != (Stats{Files: 1, Additions: 1}) {
		t.Errorf("counts %+v, %v", st, err)
	}
	for _, bad := range []struct {
		turn         int
		tree, parent string
	}{{0, tree, ""}, {1, "-p", ""}, {1, tree, "--all"}} {
		if _, err := r.RecordStart(ctx, "s", bad.turn, bad.tree, bad.parent); err == nil {
			t.Errorf("RecordStart(%d, %q, %q) succeeded", bad.turn, bad.tree, bad.parent)
		}
	}
	if err := r.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if refs := run(t, dir, "for-each-ref", "refs/agents/"); refs != "" {
		t.Errorf("refs left: %s", refs)
	}
}

// TestTurnChanges checks the raw records read back, with names git would
// quote, a submodule-free mode change and commits asked for twice.
func TestTurnChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newRepo(t, map[string]string{"a.txt": "a\n", "tab\tname": "t\n"})
	r := open(t, dir)
	c0, err := r.Capture(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "tab\tname", "t2\n")
	write(t, dir, "new\nline", "n\n")
	remove(t, dir, "a.txt")
	c1, err := r.Capture(ctx, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := r.Capture(ctx, "s", 2) // nothing changed
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.TurnChanges(ctx, []string{c0, c1, c2, c1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || len(got[0]) != 0 || len(got[2]) != 0 || fmt.Sprint(got[1]) != fmt.Sprint(got[3]) {
		t.Fatalf("TurnChanges = %+v", got)
	}
	paths := map[string]FileChange{}
	for _, f := range got[1] {
		paths[f.Path] = f
	}
	if f := paths["a.txt"]; f.Before.Mode != "100644" || f.After != (Entry{}) {
		t.Errorf("a.txt: %+v", f)
	}
	if f := paths["new\nline"]; f.Before != (Entry{}) || f.After.Mode != "100644" || !isObjectID(f.After.Object) {
		t.Errorf("new\\nline: %+v", f)
	}
	if f := paths["tab\tname"]; f.Before.Object == f.After.Object || f.Before.Mode == "" || f.After.Mode == "" {
		t.Errorf("tab\\tname: %+v", f)
	}
	if len(paths) != 3 {
		t.Errorf("paths: %+v", paths)
	}
	if _, err := r.TurnChanges(ctx, []string{"--stdin"}); err == nil {
		t.Error("TurnChanges took an option for a commit")
	}
}
