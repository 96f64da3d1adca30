package automations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

// mkTree makes folder dir holding n folders with itself (n-1 below it,
// some nested), and returns it.
func mkTree(t *testing.T, dir string, n int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, n)
	for k := range n - 1 {
		// Ten in the folder, d0 to d9, and ten in each of those, and so on.
		parent := dir
		if k >= 10 {
			parent = paths[k-10]
		}
		p := filepath.Join(parent, fmt.Sprintf("d%d", k))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return dir
}

func filesDef(folder string) protocol.AutomationDefinition {
	return eventDef(TriggerFiles, EventFileChanged, map[string]string{"folder": folder, "pattern": "*.md"})
}

// watchErrorOf reads an entry's watchErrorMeta, as clients do.
func watchErrorOf(t *testing.T, e protocol.AutomationEntry) (protocol.ErrorInfo, bool) {
	t.Helper()
	if raw, ok := e.Meta[watchErrorMeta]; ok {
		if _, ok := WatchErrorOf(e); !ok {
			t.Fatalf("WatchErrorOf cannot read %s", raw)
		}
	}
	return WatchErrorOf(e)
}

// waitEntry waits for a change of the automation at uri that cond takes.
func (h *harness) waitEntry(uri protocol.URI, what string, cond func(protocol.AutomationEntry) bool) protocol.AutomationEntry {
	h.t.Helper()
	timeout := time.After(testwait.Hang)
	for {
		select {
		case c := <-h.changes:
			if c.Entry != nil && c.Entry.Resource == uri && cond(*c.Entry) {
				return *c.Entry
			}
		case <-timeout:
			h.t.Fatalf("waiting for %s", what)
		}
	}
}

// runsOf counts the runs owner's automation at uri has had.
func (h *harness) runsOf(owner string, uri protocol.URI) int {
	h.t.Helper()
	e, err := h.e.Entry(owner, uri)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(e.Runs)
}

// change writes a file the triggers take, lets its quiet time pass, and
// waits for the run it starts.
func (h *harness) change(p *probe, file string) protocol.AutomationRunState {
	h.t.Helper()
	appendFile(h.t, file, "hi\n")
	p.sync()
	h.clock.Advance(DefaultDebounce)
	return h.waitEnded(1)[0]
}

// logged is a slog handler keeping the messages of the records at or
// above a level.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

func (l *logged) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

const brokenLog = "automations: a trigger's watch does not work; it fires for nothing"

// newShared is an engine whose watcher has a budget and each person a
// share, with a probe to wait on it; marks go to a folder root watches.
func newShared(t *testing.T, share, budget int, log *logged) (*harness, *probe) {
	t.Helper()
	clock := NewFakeClock(t0)
	marks := mkTree(t, filepath.Join(t.TempDir(), "marks"), 1)
	p := newProbe(t, clock, marks)
	p.budget = budget
	opts := Options{Watch: p.watch, WatchShare: share, WatchBudget: budget}
	if log != nil {
		opts.Logger = slog.New(log)
	}
	h := newHarness(t, t.TempDir(), clock, opts)
	if _, err := h.e.Create("root:box", "ahp-automation:/marks", eventDef(TriggerFiles, EventFileChanged, map[string]string{"folder": marks, "pattern": "*.never"})); err != nil {
		t.Fatal(err)
	}
	return h, p
}

// TestWatchShareAtCreation: a trigger whose folders would take its owner
// past their share is refused when made or changed, saying how many
// folders against how many; the folders it shares with the owner's other
// triggers count once, a .git inside is not counted, and the host itself
// has no share.
func TestWatchShareAtCreation(t *testing.T) {
	const share, budget = 6, 64
	for _, tc := range []struct {
		name   string
		owner  string
		before []int // trees of the owner's automations made first, by size
		size   int   // the tree of the one made now
		same   bool  // it watches the first tree before again
		git    int   // folders of a .git inside the tree
		update bool  // made small, then changed to the tree
		want   string
	}{
		{name: "fits", owner: "user:ann", size: share},
		{name: "alone past the share", owner: "user:ann", size: 40,
			want: fmt.Sprintf(`trigger "w": folder %%s holds at least %d folders with its subfolders; one person may watch %d folders on this host (their share of its %d)`, share+1, share, budget)},
		{name: "with the others past the share", owner: "user:ann", before: []int{4}, size: 3,
			want: fmt.Sprintf(`trigger "w": folder %%s would add 3 folders to the 4 user:ann's triggers watch, 7 in all; one person may watch %d folders on this host (their share of its %d)`, share, budget)},
		{name: "the same folder counts once", owner: "user:ann", before: []int{5}, same: true},
		{name: "a .git inside is not counted", owner: "user:ann", size: share, git: 30},
		{name: "changed past the share", owner: "user:ann", size: 40, update: true,
			want: fmt.Sprintf(`trigger "w": folder %%s holds at least %d folders`, share+1)},
		{name: "root has no share", owner: "root:box", size: 40},
		{name: "nobody has no share", owner: "", size: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newShared(t, share, budget, nil)
			base := t.TempDir()
			var first string
			for i, n := range tc.before {
				dir := mkTree(t, filepath.Join(base, fmt.Sprintf("before%d", i)), n)
				first = dir
				if _, err := h.e.Create(tc.owner, protocol.URI(fmt.Sprintf("ahp-automation:/before%d", i)), filesDef(dir)); err != nil {
					t.Fatal(err)
				}
			}
			dir := first
			if !tc.same {
				dir = mkTree(t, filepath.Join(base, "now"), tc.size)
			}
			if tc.git > 0 {
				mkTree(t, filepath.Join(dir, ".git"), tc.git)
			}
			const uri = "ahp-automation:/now"
			var err error
			if tc.update {
				small := mkTree(t, filepath.Join(base, "small"), 1)
				if _, err := h.e.Create(tc.owner, uri, filesDef(small)); err != nil {
					t.Fatal(err)
				}
				_, err = h.e.Update(tc.owner, uri, protocol.AutomationDefinitionPatch{Triggers: filesDef(dir).Triggers})
			} else {
				_, err = h.e.Create(tc.owner, uri, filesDef(dir))
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if e, _ := h.e.Entry(tc.owner, uri); e.Meta != nil {
					t.Fatalf("it says %s", e.Meta)
				}
				return
			}
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, dir)
			}
			if !errors.Is(err, ErrLimit) || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %v\nwant  %s", err, want)
			}
			e, gerr := h.e.Entry(tc.owner, uri)
			switch {
			case tc.update && (gerr != nil || configOf(e.Definition.Triggers[0].(*protocol.AutomationEventTrigger))["folder"] == dir):
				t.Fatalf("the refused change was taken: %+v %v", e, gerr)
			case !tc.update && gerr == nil:
				t.Fatal("a refused automation was kept")
			}
		})
	}
}

// TestWatchShareKeepsOthersFiring is the issue's: one member watches a
// tree bigger than their share (and the host's budget), and another
// member's triggers, and the first's own that fit, still fire. Made over
// the protocol, the big one is refused; declared in the config file
// (never refused), it watches nothing, fires for nothing (not even for
// what another's watch sees in its tree), and its automation says why.
func TestWatchShareKeepsOthersFiring(t *testing.T) {
	const share, budget = 8, 20
	for _, declared := range []bool{false, true} {
		t.Run(fmt.Sprintf("declared=%v", declared), func(t *testing.T) {
			log := &logged{}
			h, p := newShared(t, share, budget, log)
			base := t.TempDir()
			huge := mkTree(t, filepath.Join(base, "huge"), 300) // more than the host's budget
			annDir := mkTree(t, filepath.Join(base, "ann"), share)
			// Bob's folder is in the huge tree: what his watch sees there
			// starts nothing of Ann's huge trigger, which watches nothing.
			bobDir := mkTree(t, filepath.Join(huge, "bob"), 3)
			if declared {
				if err := h.e.SetDeclared([]Declared{{Owner: "user:ann", Resource: "ahp-automation:/huge", Definition: filesDef(huge)}}); err != nil {
					t.Fatal(err)
				}
				e, _ := h.e.Entry("user:ann", "ahp-automation:/huge")
				info, ok := watchErrorOf(t, e)
				want := fmt.Sprintf(`trigger "w": folder %s holds more than %d folders with its subfolders, the share one person may watch on this host (of its %d); it is not watched: watch a smaller folder`, huge, share, budget)
				if !ok || info.ErrorType != "watchShareExceeded" || info.Message != want {
					t.Fatalf("the declared automation says %+v\nwant %s", info, want)
				}
				if n := log.count(brokenLog); n != 1 {
					t.Fatalf("logged %d times", n)
				}
			} else {
				_, err := h.e.Create("user:ann", "ahp-automation:/huge", filesDef(huge))
				if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), fmt.Sprintf("holds at least %d folders with its subfolders; one person may watch %d folders", share+1, share)) {
					t.Fatalf("the huge tree: %v", err)
				}
			}
			if _, err := h.e.Create("user:ann", "ahp-automation:/ann", filesDef(annDir)); err != nil {
				t.Fatal(err)
			}
			if _, err := h.e.Create("user:bob", "ahp-automation:/bob", filesDef(bobDir)); err != nil {
				t.Fatal(err)
			}
			for _, e := range append(h.e.Entries("user:ann"), h.e.Entries("user:bob")...) {
				if _, ok := watchErrorOf(t, e); ok != (e.Resource == "ahp-automation:/huge") {
					t.Fatalf("%s says %s", e.Resource, e.Meta)
				}
			}
			// Deep in each tree, twice each, both fire every time.
			for range 2 {
				if r := h.change(p, filepath.Join(bobDir, "d1", "notes.md")); r.Automation != "ahp-automation:/bob" {
					t.Fatalf("bob's change ran %s", r.Automation)
				}
				if r := h.change(p, filepath.Join(annDir, "d2", "notes.md")); r.Automation != "ahp-automation:/ann" {
					t.Fatalf("ann's change ran %s", r.Automation)
				}
			}
			// The huge tree's changes start nothing.
			appendFile(t, filepath.Join(huge, "d3", "notes.md"), "hi\n")
			p.sync()
			h.clock.Advance(DefaultDebounce)
			h.change(p, filepath.Join(bobDir, "notes.md")) // after the huge tree's change, in order
			if declared {
				if n := h.runsOf("user:ann", "ahp-automation:/huge"); n != 0 {
					t.Fatalf("the huge tree's automation ran %d times", n)
				}
			}
			if a, b := h.runsOf("user:ann", "ahp-automation:/ann"), h.runsOf("user:bob", "ahp-automation:/bob"); a != 2 || b != 3 {
				t.Fatalf("runs: ann %d, bob %d; want 2 and 3", a, b)
			}
		})
	}
}

// TestWatchGrowsPastShare: a tree that grows past its owner's share
// after its trigger was made stops being watched, and its automation
// says so (logged once); another member's trigger fires on, and the
// folders it let go are free for others.
func TestWatchGrowsPastShare(t *testing.T) {
	const share, budget = 6, 14
	log := &logged{}
	h, p := newShared(t, share, budget, log)
	base := t.TempDir()
	annDir := mkTree(t, filepath.Join(base, "ann"), 4)
	bobDir := mkTree(t, filepath.Join(base, "bob"), 2)
	for owner, dir := range map[string]string{"user:ann": annDir, "user:bob": bobDir} {
		if _, err := h.e.Create(owner, protocol.URI("ahp-automation:/"+strings.TrimPrefix(owner, "user:")), filesDef(dir)); err != nil {
			t.Fatal(err)
		}
	}
	h.change(p, filepath.Join(annDir, "d1", "a.md"))

	// Two folders more fit the share; three past it, made at once.
	for _, d := range []string{"new1", "new2"} {
		if err := os.Mkdir(filepath.Join(annDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.sync()
	h.change(p, filepath.Join(annDir, "new2", "a.md")) // watched: its change fires
	if err := os.MkdirAll(filepath.Join(annDir, "new3", "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := h.waitEntry("ahp-automation:/ann", "ann's automation to say its watch stopped", func(e protocol.AutomationEntry) bool {
		_, ok := watchErrorOf(t, e)
		return ok
	})
	info, _ := watchErrorOf(t, e)
	want := fmt.Sprintf(`trigger "w": folder %s grew past %d folders with its subfolders, the share one person may watch on this host (of its %d); it is no longer watched: watch a smaller folder`, annDir, share, budget)
	if info.ErrorType != "watchShareExceeded" || info.Message != want {
		t.Fatalf("ann's automation says %+v\nwant %s", info, want)
	}

	// Ann's changes start nothing; Bob's fire.
	appendFile(t, filepath.Join(annDir, "b.md"), "hi\n")
	p.sync()
	h.clock.Advance(DefaultDebounce)
	if r := h.change(p, filepath.Join(bobDir, "b.md")); r.Automation != "ahp-automation:/bob" {
		t.Fatalf("ran %s", r.Automation)
	}
	if n := h.runsOf("user:ann", "ahp-automation:/ann"); n != 2 {
		t.Fatalf("ann's automation ran %d times, want 2", n)
	}
	if n := log.count(brokenLog); n != 1 {
		t.Fatalf("logged %d times, want once", n)
	}
	// What Ann let go is free: a member whose tree needs the host's
	// budget but for Bob's, root's marks and a folder, gets it.
	carl := mkTree(t, filepath.Join(base, "carl"), share)
	if _, err := h.e.Create("user:carl", "ahp-automation:/carl", filesDef(carl)); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.e.Entry("user:carl", "ahp-automation:/carl"); e.Meta != nil {
		t.Fatalf("carl's automation says %s", e.Meta)
	}
	// Once ann watches a smaller folder, it works again.
	if _, err := h.e.Update("user:ann", "ahp-automation:/ann", protocol.AutomationDefinitionPatch{Triggers: filesDef(filepath.Join(annDir, "d1")).Triggers}); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.e.Entry("user:ann", "ahp-automation:/ann"); e.Meta != nil {
		t.Fatalf("ann's automation still says %s", e.Meta)
	}
	h.change(p, filepath.Join(annDir, "d1", "c.md"))
}

// TestWatchBudgetFirstComeFirstServed: when the host's budget is spent,
// the trigger that came last watches nothing and says so; the earlier
// keep their folders, and once one goes, the last is watched.
func TestWatchBudgetFirstComeFirstServed(t *testing.T) {
	const share, budget = 5, 10
	h, p := newShared(t, share, budget, nil)
	base := t.TempDir()
	dirs := map[string]string{}
	for _, who := range []string{"ann", "bob", "carl"} {
		dirs[who] = mkTree(t, filepath.Join(base, who), 4) // 1 (root's marks) + 4 + 4 fit; 4 more do not
		if _, err := h.e.Create("user:"+who, protocol.URI("ahp-automation:/"+who), filesDef(dirs[who])); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := h.e.Entry("user:carl", "ahp-automation:/carl")
	info, ok := watchErrorOf(t, e)
	want := fmt.Sprintf(`trigger "w": the host's budget of %d watched folders is spent by the triggers that came first, so folder %s is not watched (it is tried again when automations change); the host's admin can raise the budget`, budget, dirs["carl"])
	if !ok || info.ErrorType != "watchBudgetSpent" || info.Message != want {
		t.Fatalf("carl's automation says %+v\nwant %s", info, want)
	}
	h.change(p, filepath.Join(dirs["ann"], "a.md"))
	h.change(p, filepath.Join(dirs["bob"], "b.md"))
	if err := h.e.Remove("user:ann", "ahp-automation:/ann"); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.e.Entry("user:carl", "ahp-automation:/carl"); e.Meta != nil {
		t.Fatalf("carl's automation still says %s", e.Meta)
	}
	if r := h.change(p, filepath.Join(dirs["carl"], "c.md")); r.Automation != "ahp-automation:/carl" {
		t.Fatalf("ran %s", r.Automation)
	}
}

// TestWatchFolderGone: a watched folder removed stops its watch, and its
// automation says so; others fire on.
func TestWatchFolderGone(t *testing.T) {
	h, p := newShared(t, 0, 0, nil)
	base := t.TempDir()
	annDir := mkTree(t, filepath.Join(base, "ann"), 3)
	bobDir := mkTree(t, filepath.Join(base, "bob"), 1)
	for owner, dir := range map[string]string{"user:ann": annDir, "user:bob": bobDir} {
		if _, err := h.e.Create(owner, protocol.URI("ahp-automation:/"+strings.TrimPrefix(owner, "user:")), filesDef(dir)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(annDir); err != nil {
		t.Fatal(err)
	}
	e := h.waitEntry("ahp-automation:/ann", "ann's automation to say its folder is gone", func(e protocol.AutomationEntry) bool {
		_, ok := watchErrorOf(t, e)
		return ok
	})
	info, _ := watchErrorOf(t, e)
	want := fmt.Sprintf(`trigger "w": folder %s is gone (removed or renamed); it is watched again once it is back and automations change, or ahpd restarts`, annDir)
	if info.ErrorType != "watchGone" || info.Message != want {
		t.Fatalf("ann's automation says %+v\nwant %s", info, want)
	}
	h.change(p, filepath.Join(bobDir, "b.md"))
}

// TestWatchMissedChanges: when fsnotify says changes were lost (the
// kernel's queue overflowed), every watched automation says so until the
// watches are next set, and fires on meanwhile.
func TestWatchMissedChanges(t *testing.T) {
	h, p := newShared(t, 0, 0, nil)
	dir := mkTree(t, filepath.Join(t.TempDir(), "ann"), 1)
	if _, err := h.e.Create("user:ann", "ahp-automation:/ann", filesDef(dir)); err != nil {
		t.Fatal(err)
	}
	p.fw.w.Errors <- fsnotify.ErrEventOverflow
	e := h.waitEntry("ahp-automation:/ann", "ann's automation to say changes were lost", func(e protocol.AutomationEntry) bool {
		_, ok := watchErrorOf(t, e)
		return ok
	})
	info, _ := watchErrorOf(t, e)
	if info.ErrorType != "watchMissedChanges" || !strings.Contains(info.Message, "the kernel's queue of file events overflowed") {
		t.Fatalf("ann's automation says %+v", info)
	}
	h.change(p, filepath.Join(dir, "a.md"))
	if _, err := h.e.Create("user:ann", "ahp-automation:/other", filesDef(dir)); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.e.Entry("user:ann", "ahp-automation:/ann"); e.Meta != nil {
		t.Fatalf("still says %s once the watches were set again", e.Meta)
	}
}

// TestWatchFoldersLetGo: folders removed from a watched tree, or renamed
// out of it, no longer count against the share; one renamed within it
// still does. A tree at its share frees what went, takes as many new
// folders, and stops at one more.
func TestWatchFoldersLetGo(t *testing.T) {
	const share, budget = 6, 64
	for _, tc := range []struct {
		name  string
		away  func(t *testing.T, tree, outside string) // on a tree of the root and d0 to d4
		freed int
	}{
		{"removed", func(t *testing.T, tree, _ string) {
			for _, d := range []string{"d0", "d1"} {
				if err := os.RemoveAll(filepath.Join(tree, d)); err != nil {
					t.Fatal(err)
				}
			}
		}, 2},
		{"renamed out", func(t *testing.T, tree, outside string) {
			for _, d := range []string{"d0", "d1"} {
				if err := os.Rename(filepath.Join(tree, d), filepath.Join(outside, d)); err != nil {
					t.Fatal(err)
				}
			}
		}, 2},
		{"renamed within, and one removed", func(t *testing.T, tree, _ string) {
			if err := os.Rename(filepath.Join(tree, "d0"), filepath.Join(tree, "d1", "d0")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(tree, "d2")); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, p := newShared(t, share, budget, nil)
			base := t.TempDir()
			tree := mkTree(t, filepath.Join(base, "ann"), share)
			outside := mkTree(t, filepath.Join(base, "outside"), 1)
			const uri = "ahp-automation:/ann"
			if _, err := h.e.Create("user:ann", uri, filesDef(tree)); err != nil {
				t.Fatal(err)
			}
			tc.away(t, tree, outside)
			p.sync()
			var last string
			for i := range tc.freed {
				last = filepath.Join(tree, fmt.Sprintf("new%d", i))
				if err := os.Mkdir(last, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			p.sync() // the new folders are watched before a file is made in one
			if r := h.change(p, filepath.Join(last, "a.md")); r.Automation != uri {
				t.Fatalf("ran %s", r.Automation)
			}
			if e, _ := h.e.Entry("user:ann", uri); e.Meta != nil {
				t.Fatalf("at its share, it says %s", e.Meta)
			}
			if err := os.Mkdir(filepath.Join(tree, "one-more"), 0o755); err != nil {
				t.Fatal(err)
			}
			e := h.waitEntry(uri, "the tree to be past its share", func(e protocol.AutomationEntry) bool {
				_, ok := watchErrorOf(t, e)
				return ok
			})
			if info, _ := watchErrorOf(t, e); info.ErrorType != "watchShareExceeded" {
				t.Fatalf("it says %+v", info)
			}
		})
	}
}
