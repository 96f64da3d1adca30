package automations

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ahpd/ahpd/protocol"
)

// Defaults of the watch budgets (Options.WatchBudget, Options.WatchShare).
const (
	// DefaultWatchBudget bounds the folders the file watcher watches for
	// the whole host, so the triggers cannot exhaust the system's inotify
	// watches (fs.inotify.max_user_watches, which every program of the
	// user shares; 8,192 on older kernels).
	DefaultWatchBudget = 4096
	// DefaultWatchShare bounds the folders one person's triggers watch
	// together: a quarter of the host's budget, so one member's big tree
	// cannot spend it and leave everyone else's triggers deaf.
	DefaultWatchShare = 1024
)

// Why a watch is not watching: errors.Is of a WatchProblem's Err.
var (
	// ErrWatchShare: its folders would take its owner past their share.
	ErrWatchShare = errors.New("past the owner's share of watched folders")
	// ErrWatchBudget: the host's budget of folders is spent by watches
	// that came first.
	ErrWatchBudget = errors.New("the host's budget of watched folders is spent")
	// ErrWatchGone: its folder (or repository) is not there.
	ErrWatchGone = errors.New("the watched folder is gone")
)

// watchError is why a watch is not watching: a person's sentence, and
// which of the errors above it is (nil: the watcher failed).
type watchError struct {
	kind error
	msg  string
}

func (e *watchError) Error() string { return e.msg }
func (e *watchError) Unwrap() error { return e.kind }

func watchErrorf(kind error, format string, args ...any) error {
	return &watchError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Watch is one enabled event trigger's watch, as the engine hands it to
// a Watcher.
type Watch struct {
	Owner      string
	Automation protocol.URI
	Trigger    string // the trigger's id
	Type       string // TriggerFiles or TriggerGitRef
	Path       string // the folder, or the repository's working tree
	// Share is the most folders the owner's watches may hold together
	// (a folder two of them watch counts once); 0: no share, the host's
	// budget alone bounds them.
	Share int
}

// WatchProblem is a watch that is not watching, and why; or, Missed, one
// that is but may have missed changes.
type WatchProblem struct {
	Watch
	Err error // errors.Is ErrWatchShare, ErrWatchBudget, ErrWatchGone, or none of them: the watcher failed
	// Missed marks a watch that works but whose changes were lost for a
	// while (the kernel dropped events): its trigger still fires, and Err
	// says when and why. It stands until the watches are next set.
	Missed bool
}

// WatchSink is where a Watcher sends what it sees.
type WatchSink struct {
	// Emit sends an event for the triggers to match.
	Emit func(Event)
	// Problems is told every watch that does not work (and why) each
	// time that changes; none is all working. It is called in order, one
	// call at a time, and must not call the Watcher: an FSWatcher calls
	// it holding its lock, which is what keeps a later report from being
	// overtaken by an earlier. (So whoever Problems locks must never call
	// the Watcher holding that lock: the engine never does.)
	Problems func([]WatchProblem)
}

// FSWatcher watches folders (with their subfolders) for file triggers and
// repositories' refs for git ref triggers, with one fsnotify watcher.
// Events are hints (inotify merges them), so a ref change is found by
// reading the refs again and comparing. A file's changes are debounced
// (WatcherOptions.Debounce): one save is one file-changed event.
//
// Folders are a budget: the host's (WatcherOptions.Budget) and each
// owner's share of it (Watch.Share). A watch takes its folders whole or
// not at all, in the order Set names them, and keeps them while its
// folder is there: first come, first served, so a new watch or a growing
// tree never takes folders from another watch. One that cannot have its
// folders (past its share, the budget spent, its folder gone, the system
// refusing) watches nothing and is told to WatchSink.Problems; the
// others are not touched. Set tries those again.
type FSWatcher struct {
	log    *slog.Logger
	sink   WatchSink
	w      *fsnotify.Watcher
	done   chan struct{}
	clock  Clock
	deb    *debouncer // the run goroutine's
	noted  func(path string)
	budget int

	mu      sync.Mutex
	watches []*watchEntry                // in the order of Set
	held    map[string]int               // folder -> the watches holding it; each is added to w once
	owned   map[string]map[string]int    // owner -> folder -> their watches holding it
	byGit   map[string]string            // git dir -> working tree, of the repositories watched
	refs    map[string]map[string]string // working tree -> ref -> value
	missed  string                       // set: every watch may have missed changes, and this says why
	stopped error                        // set: fsnotify stopped, nothing is watched
	closing bool
	told    []WatchProblem // what Problems was last told
}

// watchEntry is one Watch and the folders it holds.
type watchEntry struct {
	Watch
	dirs    map[string]bool
	started bool  // its folders were taken
	err     error // why it holds none; nil when it is watching (or not yet tried)
	repo    *repoWatch
}

type repoWatch struct{ gitDir, commonDir string }

// tree is the folder under which the entry holds every subfolder (but
// a .git): the folder of a file trigger, a repository's refs.
func (e *watchEntry) tree() string {
	if e.repo != nil {
		return filepath.Join(e.repo.commonDir, "refs")
	}
	return e.Path
}

// isRoot reports whether d is a folder the entry cannot do without.
func (e *watchEntry) isRoot(d string) bool {
	return d == e.tree() || (e.repo != nil && (d == e.repo.gitDir || d == e.repo.commonDir))
}

// NewFSWatcher returns the Options.Watch that makes an FSWatcher.
func NewFSWatcher(opts WatcherOptions) func(WatchSink) (Watcher, error) {
	return func(sink WatchSink) (Watcher, error) {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, fmt.Errorf("inotify: %w", err)
		}
		log, clk := opts.Log, opts.Clock
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		if clk == nil {
			clk = RealClock{}
		}
		if sink.Emit == nil {
			sink.Emit = func(Event) {}
		}
		if sink.Problems == nil {
			sink.Problems = func([]WatchProblem) {}
		}
		budget := opts.Budget
		if budget <= 0 {
			budget = DefaultWatchBudget
		}
		fw := &FSWatcher{log: log, sink: sink, w: w, done: make(chan struct{}), clock: clk, deb: newDebouncer(opts.Debounce), noted: opts.noted,
			budget: budget, held: map[string]int{}, owned: map[string]map[string]int{}, byGit: map[string]string{}, refs: map[string]map[string]string{}}
		go fw.run()
		return fw, nil
	}
}

// Set replaces what is watched. A watch named before keeps its folders;
// one no longer named lets them go; then each not watching (new, or
// refused before) tries to take its folders, in the order given.
func (fw *FSWatcher) Set(watches []Watch) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	want := make(map[Watch]bool, len(watches))
	for _, w := range watches {
		want[w] = true
	}
	old := make(map[Watch]*watchEntry, len(fw.watches))
	for _, e := range fw.watches {
		if want[e.Watch] {
			old[e.Watch] = e
		} else {
			fw.dropLocked(e)
		}
	}
	fw.watches = make([]*watchEntry, 0, len(watches))
	for _, w := range watches {
		if !want[w] {
			continue // named twice
		}
		want[w] = false
		e := old[w]
		if e == nil {
			e = &watchEntry{Watch: w, dirs: map[string]bool{}}
		}
		fw.watches = append(fw.watches, e)
	}
	fw.missed = "" // the watches are as they are told from here
	for _, e := range fw.watches {
		if !e.started {
			fw.startLocked(e)
		}
	}
	fw.changedLocked()
}

// Check says whether w's folders fit in its owner's share, as they are
// now (the folders it shares with the owner's other watches count once),
// without watching it: nil when they do, or when only watching it will
// tell (a folder that is not there), else an error that is ErrWatchShare.
// It counts at most Share+1 folders.
func (fw *FSWatcher) Check(w Watch) error {
	if w.Share <= 0 {
		return nil
	}
	var dirs []string
	over := errors.New("over")
	err := dirsOf(w, func(d string) error {
		dirs = append(dirs, d)
		if len(dirs) > w.Share {
			return over
		}
		return nil
	})
	if errors.Is(err, over) {
		return watchErrorf(ErrWatchShare, "%s holds at least %d folders with its subfolders; one person may watch %d folders on this host (their share of its %d)", what(w), len(dirs), w.Share, fw.budget)
	}
	if err != nil {
		return nil
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	owned := fw.owned[w.Owner]
	add := 0
	for _, d := range dirs {
		if owned[d] == 0 {
			add++
		}
	}
	if len(owned)+add > w.Share {
		return watchErrorf(ErrWatchShare, "%s would add %d folders to the %d %s's triggers watch, %d in all; one person may watch %d folders on this host (their share of its %d)", what(w), add, len(owned), w.Owner, len(owned)+add, w.Share, fw.budget)
	}
	return nil
}

// what names a watch's place in a sentence.
func what(w Watch) string {
	if w.Type == TriggerGitRef {
		return "repository " + w.Path
	}
	return "folder " + w.Path
}

// dirsOf calls fn with each folder w would hold, until fn returns an
// error, which it returns; or it returns why w cannot be watched at all.
func dirsOf(w Watch, fn func(string) error) error {
	if w.Type != TriggerGitRef {
		return walkTree(w.Path, fn)
	}
	rw, err := findGitDirs(w.Path)
	if err != nil {
		return err
	}
	for _, d := range []string{rw.gitDir, rw.commonDir} {
		if err := fn(d); err != nil {
			return err
		}
	}
	return walkTree(filepath.Join(rw.commonDir, "refs"), fn)
}

// walkTree calls fn with root and each folder under it, but not a .git
// inside (a repository's objects are thousands of folders no file trigger
// wants), until fn returns an error, which it returns. A root it cannot
// read is an error; a subfolder it cannot read is left out.
func walkTree(root string, fn func(string) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		if !d.IsDir() {
			if p == root {
				return fmt.Errorf("%s is not a folder (a symbolic link is not followed: name the folder it leads to)", root)
			}
			return nil
		}
		if d.Name() == ".git" && p != root {
			return filepath.SkipDir
		}
		return fn(p)
	})
}

// Close stops watching. Changes still being debounced are dropped: ahpd
// is stopping, and runs would not start.
func (fw *FSWatcher) Close() error {
	fw.mu.Lock()
	fw.closing = true
	fw.mu.Unlock()
	err := fw.w.Close()
	<-fw.done
	return err
}

// startLocked has e take its folders, or none and say why.
func (fw *FSWatcher) startLocked(e *watchEntry) {
	e.err, e.repo = nil, nil
	err := fw.stopped
	if err == nil && e.Type == TriggerGitRef {
		rw, ferr := findGitDirs(e.Path)
		if ferr != nil {
			if errors.Is(ferr, fs.ErrNotExist) {
				err = watchErrorf(ErrWatchGone, "repository %s is not there: no %s", e.Path, filepath.Join(e.Path, ".git"))
			} else {
				err = watchErrorf(nil, "repository %s: %v", e.Path, ferr)
			}
		}
		e.repo = rw
	}
	if err == nil {
		var singles []string
		if e.repo != nil {
			singles = []string{e.repo.gitDir, e.repo.commonDir}
		}
		err = fw.growLocked(e, singles, e.tree())
	}
	if err != nil {
		fw.failLocked(e, err)
		return
	}
	e.started = true
}

// failLocked has e let its folders go, saying why.
func (fw *FSWatcher) failLocked(e *watchEntry, err error) {
	fw.dropLocked(e)
	e.err, e.started = err, false
}

// growLocked has e take singles and every folder of tree it does not
// hold, all of them or, when they do not fit, none (and says why).
func (fw *FSWatcher) growLocked(e *watchEntry, singles []string, tree string) error {
	owned := fw.owned[e.Owner]
	var add []string
	seen := map[string]bool{}
	newOwned, newHeld := 0, 0
	grew := e.started // else it is starting
	consider := func(d string) error {
		if e.dirs[d] || seen[d] {
			return nil
		}
		seen[d] = true
		if e.Share > 0 && owned[d] == 0 {
			if newOwned++; len(owned)+newOwned > e.Share {
				// e's folders are among the owner's: more are others'.
				others := len(owned) > len(e.dirs)
				switch {
				case grew && others:
					return watchErrorf(ErrWatchShare, "%s grew: with the other folders %s's triggers watch, more than %d folders, the share one person may watch on this host (of its %d); it is no longer watched: watch a smaller folder", what(e.Watch), e.Owner, e.Share, fw.budget)
				case grew:
					return watchErrorf(ErrWatchShare, "%s grew past %d folders with its subfolders, the share one person may watch on this host (of its %d); it is no longer watched: watch a smaller folder", what(e.Watch), e.Share, fw.budget)
				case !others:
					return watchErrorf(ErrWatchShare, "%s holds more than %d folders with its subfolders, the share one person may watch on this host (of its %d); it is not watched: watch a smaller folder", what(e.Watch), e.Share, fw.budget)
				}
				return watchErrorf(ErrWatchShare, "%s and the other folders %s's triggers watch come to more than %d folders, the share one person may watch on this host (of its %d); it is not watched: watch a smaller folder, or turn another trigger off", what(e.Watch), e.Owner, e.Share, fw.budget)
			}
		}
		if fw.held[d] == 0 {
			if newHeld++; len(fw.held)+newHeld > fw.budget {
				if grew {
					return watchErrorf(ErrWatchBudget, "%s grew, and the host's budget of %d watched folders is spent, so it is no longer watched (it is tried again when automations change); the host's admin can raise the budget", what(e.Watch), fw.budget)
				}
				return watchErrorf(ErrWatchBudget, "the host's budget of %d watched folders is spent by the triggers that came first, so %s is not watched (it is tried again when automations change); the host's admin can raise the budget", fw.budget, what(e.Watch))
			}
		}
		add = append(add, d)
		return nil
	}
	for _, d := range singles {
		if err := consider(d); err != nil {
			return err
		}
	}
	root := tree == e.tree()
	if err := walkTree(tree, consider); err != nil {
		var we *watchError
		switch {
		case errors.As(err, &we):
			return err
		case !root:
			// A new subfolder gone again before it was looked at: the
			// event of its removal follows.
		case errors.Is(err, fs.ErrNotExist):
			return watchErrorf(ErrWatchGone, "folder %s is not there", tree)
		default:
			return watchErrorf(nil, "cannot watch %s: %v", what(e.Watch), err)
		}
	}
	for _, d := range add {
		if err := fw.holdLocked(e, d); err != nil {
			if !e.isRoot(d) && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
				fw.log.Debug("automations: a subfolder is not watched", "folder", d, "err", err)
				continue
			}
			if errors.Is(err, syscall.ENOSPC) {
				return watchErrorf(nil, "the system refused to watch folder %s: its inotify watches are used up (raise fs.inotify.max_user_watches)", d)
			}
			return watchErrorf(nil, "cannot watch folder %s: %v", d, err)
		}
	}
	return nil
}

// holdLocked has e hold folder d, adding it to the fsnotify watcher when
// no watch held it.
func (fw *FSWatcher) holdLocked(e *watchEntry, d string) error {
	if fw.held[d] == 0 {
		if err := fw.w.Add(d); err != nil {
			return err
		}
	}
	fw.held[d]++
	o := fw.owned[e.Owner]
	if o == nil {
		o = map[string]int{}
		fw.owned[e.Owner] = o
	}
	o[d]++
	e.dirs[d] = true
	return nil
}

// releaseLocked has e let folder d go, removing it from the fsnotify
// watcher when no watch holds it.
func (fw *FSWatcher) releaseLocked(e *watchEntry, d string) {
	if !e.dirs[d] {
		return
	}
	delete(e.dirs, d)
	if o := fw.owned[e.Owner]; o != nil {
		if o[d]--; o[d] <= 0 {
			delete(o, d)
		}
		if len(o) == 0 {
			delete(fw.owned, e.Owner)
		}
	}
	if fw.held[d]--; fw.held[d] <= 0 {
		delete(fw.held, d)
		_ = fw.w.Remove(d) // not watched any more if it was removed
	}
}

func (fw *FSWatcher) dropLocked(e *watchEntry) {
	for d := range e.dirs {
		fw.releaseLocked(e, d)
	}
}

// changedLocked brings the index of repositories up to date and tells
// the problems, when they changed.
func (fw *FSWatcher) changedLocked() {
	clear(fw.byGit)
	for _, e := range fw.watches {
		if e.started && e.repo != nil {
			fw.byGit[e.repo.gitDir] = e.Path
			fw.byGit[e.repo.commonDir] = e.Path
			if _, ok := fw.refs[e.Path]; !ok {
				fw.refs[e.Path] = readRefs(e.repo.commonDir)
			}
		}
	}
	for r := range fw.refs {
		if fw.repoEntryLocked(r) == nil {
			delete(fw.refs, r)
		}
	}
	var ps []WatchProblem
	for _, e := range fw.watches {
		switch {
		case e.err != nil:
			ps = append(ps, WatchProblem{Watch: e.Watch, Err: e.err})
		case fw.missed != "":
			ps = append(ps, WatchProblem{Watch: e.Watch, Err: errors.New(fw.missed), Missed: true})
		}
	}
	same := slices.EqualFunc(ps, fw.told, func(a, b WatchProblem) bool {
		return a.Watch == b.Watch && a.Missed == b.Missed && a.Err.Error() == b.Err.Error()
	})
	if same || fw.closing {
		return
	}
	fw.told = ps
	fw.sink.Problems(slices.Clone(ps))
}

// run takes fsnotify's events and sends the trigger events they make,
// a file's changes once it has been quiet. One goroutine does both, so the
// debounce needs no lock and ends with the watcher.
func (fw *FSWatcher) run() {
	defer close(fw.done)
	for {
		var due <-chan time.Time
		stop := func() {}
		if next := fw.deb.next(); !next.IsZero() {
			due, stop = fw.clock.At(next)
		}
		select {
		case ev, ok := <-fw.w.Events:
			stop()
			if !ok {
				fw.halt()
				return
			}
			// What came due before this change goes out first: a change
			// after a file's quiet time starts an event of its own, and
			// the order does not depend on which channel select took.
			fw.flush()
			for _, out := range fw.handle(ev) {
				if out.Type != TriggerFiles || !fw.deb.add(out, fw.clock.Now()) {
					fw.sink.Emit(out)
				}
			}
			if fw.noted != nil {
				fw.noted(ev.Name)
			}
		case <-due:
			stop()
			fw.flush()
		case err, ok := <-fw.w.Errors:
			stop()
			if !ok {
				fw.halt()
				return
			}
			fw.lost(err)
		}
	}
}

// lost takes an error of fsnotify's: changes were lost (the kernel's
// queue overflowed, a read failed), but the watches stand. Every watch
// says so until they are next set; the log says it once.
func (fw *FSWatcher) lost(err error) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	why := err.Error()
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		why = "the kernel's queue of file events overflowed (raise fs.inotify.max_queued_events)"
	}
	if fw.missed == "" {
		fw.log.Warn("automations: the file watcher lost changes; triggers may have missed them", "err", err)
	}
	fw.missed = fmt.Sprintf("at %s the file watcher lost changes: %s; a change then may have started no run", stamp(fw.clock.Now()), why)
	fw.changedLocked()
}

// halt is fsnotify stopping while ahpd is not: nothing is watched from
// here, and every watch says so.
func (fw *FSWatcher) halt() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closing {
		return
	}
	fw.log.Error("automations: the file watcher stopped; file and git ref triggers fire no more until ahpd restarts")
	fw.stopped = watchErrorf(nil, "the file watcher stopped; ahpd must restart to watch again")
	for _, e := range fw.watches {
		fw.failLocked(e, fw.stopped)
	}
	fw.changedLocked()
}

// handle turns one fsnotify event into trigger events, and follows the
// folders: a new one is watched by the watches it is under, one removed
// or renamed away is let go (and the watch whose own folder it was
// stops, saying so).
func (fw *FSWatcher) handle(ev fsnotify.Event) []Event {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	changed := false
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if fw.held[ev.Name] > 0 {
			fw.goneLocked(ev.Name)
			changed = true
		}
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() && filepath.Base(ev.Name) != ".git" {
			// A new folder: watched, then its files found by the next events.
			changed = fw.grownLocked(ev.Name) || changed
		}
	}
	if changed {
		fw.changedLocked()
	}
	var out []Event
	if repo := fw.repoOfLocked(ev.Name); repo != "" {
		now := readRefs(fw.repoEntryLocked(repo).repo.commonDir)
		before := fw.refs[repo]
		for ref, v := range now {
			if before[ref] != v {
				out = append(out, Event{Type: TriggerGitRef, Name: EventRefUpdated, Path: repo, Ref: ref})
			}
		}
		fw.refs[repo] = now
		return out
	}
	if ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) {
		return nil
	}
	if slices.Contains(strings.Split(filepath.ToSlash(ev.Name), "/"), ".git") {
		return nil
	}
	for _, e := range fw.watches {
		if e.started && e.Type == TriggerFiles && within(e.Path, ev.Name) {
			out = append(out, Event{Type: TriggerFiles, Name: EventFileChanged, Path: ev.Name})
			break
		}
	}
	return out
}

// grownLocked has every watch whose tree dir is in take it and its
// subfolders; one that cannot stops. It reports whether a watch stopped.
func (fw *FSWatcher) grownLocked(dir string) bool {
	stopped := false
	for _, e := range fw.watches {
		if !e.started || !within(e.tree(), dir) {
			continue
		}
		if err := fw.growLocked(e, nil, dir); err != nil {
			fw.failLocked(e, err)
			stopped = true
		}
	}
	return stopped
}

// goneLocked lets go of folder dir, removed or renamed, and of the
// folders under it; a watch whose own folder it was stops.
func (fw *FSWatcher) goneLocked(dir string) {
	for _, e := range fw.watches {
		if !e.dirs[dir] {
			continue
		}
		if e.isRoot(dir) {
			fw.failLocked(e, watchErrorf(ErrWatchGone, "folder %s is gone (removed or renamed); it is watched again once it is back and automations change, or ahpd restarts", dir))
			continue
		}
		for d := range e.dirs {
			if d == dir || within(dir, d) {
				fw.releaseLocked(e, d)
			}
		}
	}
}

// flush sends the debounced changes due by now.
func (fw *FSWatcher) flush() {
	for _, out := range fw.deb.due(fw.clock.Now()) {
		fw.sink.Emit(out)
	}
}

// repoOfLocked returns the working tree whose git dir holds p, or "".
func (fw *FSWatcher) repoOfLocked(p string) string {
	for g, r := range fw.byGit {
		if within(g, p) || p == g {
			return r
		}
	}
	return ""
}

// repoEntryLocked is a watching entry of working tree repo.
func (fw *FSWatcher) repoEntryLocked(repo string) *watchEntry {
	for _, e := range fw.watches {
		if e.started && e.repo != nil && e.Path == repo {
			return e
		}
	}
	return nil
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// findGitDirs finds a working tree's git dir and the common dir its refs
// live in (they differ in a linked worktree).
func findGitDirs(tree string) (*repoWatch, error) {
	dot := filepath.Join(tree, ".git")
	fi, err := os.Stat(dot)
	if err != nil {
		return nil, err
	}
	gitDir := dot
	if !fi.IsDir() {
		b, err := os.ReadFile(dot)
		if err != nil {
			return nil, err
		}
		p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return nil, errors.New(".git is neither a folder nor a gitdir file")
		}
		gitDir = strings.TrimSpace(p)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(tree, gitDir)
		}
	}
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = filepath.Clean(c)
	}
	return &repoWatch{gitDir: filepath.Clean(gitDir), commonDir: common}, nil
}

// readRefs reads a repository's refs: packed-refs, then loose refs over
// them. Symbolic and lock files are left out.
func readRefs(common string) map[string]string {
	refs := map[string]string{}
	if f, err := os.Open(filepath.Join(common, "packed-refs")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' || line[0] == '^' {
				continue
			}
			if v, name, ok := strings.Cut(line, " "); ok {
				refs[name] = v
			}
		}
		_ = f.Close()
	}
	root := filepath.Join(common, "refs")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		v := strings.TrimSpace(string(b))
		if strings.HasPrefix(v, "ref:") {
			return nil
		}
		rel, _ := filepath.Rel(common, p)
		refs[filepath.ToSlash(rel)] = v
		return nil
	})
	return refs
}
