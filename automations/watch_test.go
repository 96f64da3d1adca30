package automations

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

func eventDef(typ, ev string, config map[string]string) protocol.AutomationDefinition {
	cfg := protocol.Object{}
	for k, v := range config {
		b, _ := json.Marshal(v)
		cfg[k] = b
	}
	return protocol.AutomationDefinition{Title: typ, Message: protocol.Message{Text: "say changed"}, Enabled: true,
		Triggers: []protocol.AutomationTrigger{&protocol.AutomationEventTrigger{ID: "w", Type: typ,
			Events: []protocol.AutomationTriggerEventDefinition{{ID: ev}}, Config: cfg}}}
}

// probe is an FSWatcher on a fake clock whose workings a test can wait
// on: noted gets each fsnotify event once the watcher has taken it in,
// emitted each event it sends, with the clock's time.
type probe struct {
	t       *testing.T
	clock   *FakeClock
	dir     string // watched; sync writes its marks here
	noted   chan string
	emitted chan emitted
	marks   int
	budget  int // the watcher's WatcherOptions.Budget
	fw      *FSWatcher
}

type emitted struct {
	ev Event
	at time.Time
}

func newProbe(t *testing.T, clock *FakeClock, dir string) *probe {
	return &probe{t: t, clock: clock, dir: dir, noted: make(chan string, 10000), emitted: make(chan emitted, 10000)}
}

// watch is an Options.Watch: the FSWatcher, passing its events on
// before the probe sees them.
func (p *probe) watch(sink WatchSink) (Watcher, error) {
	w, err := NewFSWatcher(WatcherOptions{Clock: p.clock, Budget: p.budget, noted: func(path string) { p.noted <- path }})(WatchSink{
		Emit: func(ev Event) {
			if sink.Emit != nil {
				sink.Emit(ev)
			}
			p.emitted <- emitted{ev, p.clock.Now()}
		},
		Problems: sink.Problems,
	})
	if err != nil {
		return nil, err
	}
	p.fw = w.(*FSWatcher)
	return w, nil
}

// sync writes a mark file and waits for the watcher to take in its
// event: inotify reports in order, so every change made before it has
// been taken in too, and the clock can move.
func (p *probe) sync() {
	p.t.Helper()
	p.marks++
	mark := filepath.Join(p.dir, fmt.Sprintf("mark-%d", p.marks))
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		p.t.Fatal(err)
	}
	timeout := time.After(testwait.Hang)
	for {
		select {
		case n := <-p.noted:
			if n == mark {
				return
			}
		case <-timeout:
			p.t.Fatalf("the watcher never took in %s", mark)
		}
	}
}

// next waits for the next event the watcher sends about path.
func (p *probe) next(path string) emitted {
	p.t.Helper()
	timeout := time.After(testwait.Hang)
	for {
		select {
		case e := <-p.emitted:
			if e.ev.Path == path {
				return e
			}
		case <-timeout:
			p.t.Fatalf("no event for %s", path)
		}
	}
}

// none checks the watcher has sent nothing more about paths: a last mark,
// taken in after everything else and a moment later, is made due and
// waited for; whatever else was waiting was due before it and went first.
func (p *probe) none(paths ...string) {
	p.t.Helper()
	p.sync()
	p.clock.Advance(time.Nanosecond)
	p.sync()
	mark := filepath.Join(p.dir, fmt.Sprintf("mark-%d", p.marks))
	p.clock.Advance(MaxDebounceDelay)
	for {
		e := p.next0()
		if e.ev.Path == mark {
			return
		}
		if slices.Contains(paths, e.ev.Path) {
			p.t.Fatalf("another event for %s at %s", e.ev.Path, e.at)
		}
	}
}

func (p *probe) next0() emitted {
	p.t.Helper()
	select {
	case e := <-p.emitted:
		return e
	case <-time.After(testwait.Hang):
		p.t.Fatalf("no event")
		return emitted{}
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendFile writes to the end of a file, as `echo hi >> a.md` does.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// newProbedWatcher is a probe's watcher on its own, watching dir.
func newProbedWatcher(t *testing.T, dir string) *probe {
	p := newProbe(t, NewFakeClock(t0), dir)
	w, err := p.watch(WatchSink{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	w.Set([]Watch{{Type: TriggerFiles, Path: dir}})
	return p
}

// TestDebounceOneWriteIsOneEvent: a file created and written (two
// inotify events) makes one file-changed event, once it has been quiet
// for the debounce.
func TestDebounceOneWriteIsOneEvent(t *testing.T) {
	dir := t.TempDir()
	p := newProbedWatcher(t, dir)
	a := filepath.Join(dir, "a.md")
	appendFile(t, a, "hi\n") // create, then write
	p.sync()
	p.clock.Advance(DefaultDebounce - time.Millisecond)
	p.sync() // had a.md been due, it would have gone out before this mark was taken in
	p.clock.Advance(time.Millisecond)
	if e := p.next(a); e.ev.Type != TriggerFiles || e.ev.Name != EventFileChanged || !e.at.Equal(t0.Add(DefaultDebounce)) {
		t.Fatalf("event %+v at %s, want fileChanged at %s", e.ev, e.at, t0.Add(DefaultDebounce))
	}
	p.none(a)
}

// TestDebounceTwoPaths: two files changed together are two events.
func TestDebounceTwoPaths(t *testing.T) {
	dir := t.TempDir()
	p := newProbedWatcher(t, dir)
	a, b := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	appendFile(t, a, "one\n")
	writeFile(t, b, "two\n")
	appendFile(t, a, "three\n")
	p.sync()
	p.clock.Advance(DefaultDebounce)
	got := map[string]int{}
	for range 2 {
		e := p.next0()
		for e.ev.Path != a && e.ev.Path != b {
			e = p.next0() // a mark
		}
		got[e.ev.Path]++
	}
	if got[a] != 1 || got[b] != 1 {
		t.Fatalf("events %v, want one each", got)
	}
	p.none(a, b)
}

// TestDebounceCapsTheDelay: a file written more often than the debounce,
// for longer than MaxDebounceDelay, still makes an event every
// MaxDebounceDelay, and one more once the writing stops.
func TestDebounceCapsTheDelay(t *testing.T) {
	dir := t.TempDir()
	p := newProbedWatcher(t, dir)
	a := filepath.Join(dir, "log.txt")
	step := DefaultDebounce / 2
	var fired []time.Duration
	for elapsed := time.Duration(0); elapsed < MaxDebounceDelay+5*step; {
		appendFile(t, a, "line\n")
		p.sync()
		p.clock.Advance(step)
		elapsed += step
		if elapsed == MaxDebounceDelay { // the first change was this long ago
			fired = append(fired, p.next(a).at.Sub(t0))
		}
	}
	// The last write was at the cap plus 4 steps, a step ago: quiet for
	// the debounce one step on.
	p.clock.Advance(step)
	fired = append(fired, p.next(a).at.Sub(t0))
	want := []time.Duration{MaxDebounceDelay, MaxDebounceDelay + 4*step + DefaultDebounce}
	if !slices.Equal(fired, want) {
		t.Fatalf("events at %v, want %v", fired, want)
	}
	p.none(a)
}

func TestFileChangedTrigger(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "notes")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	clock := NewFakeClock(t0)
	p := newProbe(t, clock, dir)
	h := newHarness(t, t.TempDir(), clock, Options{Watch: p.watch})
	if _, err := h.e.Create("user:ann", "ahp-automation:/files", eventDef(TriggerFiles, EventFileChanged, map[string]string{"folder": dir, "pattern": "*.md"})); err != nil {
		t.Fatal(err)
	}
	// A file the pattern leaves out, then one it takes, in a subfolder,
	// created and written as `echo hi > b.md` does.
	writeFile(t, filepath.Join(sub, "a.txt"), "x")
	appendFile(t, filepath.Join(sub, "b.md"), "hi\n")
	p.sync()
	clock.Advance(DefaultDebounce)
	ended := h.waitEnded(1)
	o := ended[0].Origin.(*protocol.AutomationTriggeredRunOrigin)
	var path string
	_ = json.Unmarshal(o.Event["path"], &path)
	if path != filepath.Join(sub, "b.md") {
		t.Fatalf("run started by %q", path)
	}
	p.none() // the engine has seen every event sent by now
	if n := len(h.e.Entries("user:ann")[0].Runs); n != 1 {
		t.Fatalf("%d runs from one write, want 1", n)
	}
}

func TestGitRefTrigger(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one")
	h := newHarness(t, t.TempDir(), NewFakeClock(t0), Options{})
	if _, err := h.e.Create("user:ann", "ahp-automation:/refs", eventDef(TriggerGitRef, EventRefUpdated, map[string]string{"repository": repo, "ref": "refs/heads/release*"})); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "--allow-empty", "-m", "two") // main moves: not watched
	git("branch", "release-1")                        // matches
	ended := h.waitEnded(1)
	o := ended[0].Origin.(*protocol.AutomationTriggeredRunOrigin)
	var ref string
	_ = json.Unmarshal(o.Event["ref"], &ref)
	if ref != "refs/heads/release-1" {
		t.Fatalf("run started by ref %q", ref)
	}
	if n := len(h.e.Entries("user:ann")[0].Runs); n != 1 {
		t.Fatalf("%d runs", n)
	}
}
