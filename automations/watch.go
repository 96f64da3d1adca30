package automations

import (
	"bufio"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// maxWatchedDirs bounds the folders one watcher adds, so a trigger on /
// cannot exhaust the system's inotify watches.
const maxWatchedDirs = 4096

// FSWatcher watches folders (with their subfolders) for file triggers and
// repositories' refs for git ref triggers, with one fsnotify watcher.
// Events are hints (inotify merges them), so a ref change is found by
// reading the refs again and comparing. A file's changes are debounced
// (WatcherOptions.Debounce): one save is one file-changed event.
type FSWatcher struct {
	log   *slog.Logger
	emit  func(Event)
	w     *fsnotify.Watcher
	done  chan struct{}
	clock Clock
	deb   *debouncer // the run goroutine's
	noted func(path string)

	mu      sync.Mutex
	folders []string                     // roots of file triggers
	repos   map[string]*repoWatch        // by working tree path
	dirs    map[string]bool              // every folder added to w
	byGit   map[string]string            // git dir -> working tree
	refs    map[string]map[string]string // working tree -> ref -> value
}

type repoWatch struct{ gitDir, commonDir string }

// NewFSWatcher returns the Options.Watch that makes an FSWatcher.
func NewFSWatcher(opts WatcherOptions) func(emit func(Event)) (Watcher, error) {
	return func(emit func(Event)) (Watcher, error) {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, err
		}
		log, clk := opts.Log, opts.Clock
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		if clk == nil {
			clk = RealClock{}
		}
		fw := &FSWatcher{log: log, emit: emit, w: w, done: make(chan struct{}), clock: clk, deb: newDebouncer(opts.Debounce), noted: opts.noted,
			repos: map[string]*repoWatch{}, dirs: map[string]bool{}, byGit: map[string]string{}, refs: map[string]map[string]string{}}
		go fw.run()
		return fw, nil
	}
}

// Set replaces what is watched.
func (fw *FSWatcher) Set(folders, repos []string) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for d := range fw.dirs {
		_ = fw.w.Remove(d)
	}
	fw.dirs = map[string]bool{}
	fw.folders = slices.Clone(folders)
	fw.repos = map[string]*repoWatch{}
	fw.byGit = map[string]string{}
	for _, f := range folders {
		fw.addTreeLocked(f)
	}
	for _, r := range repos {
		rw, err := findGitDirs(r)
		if err != nil {
			fw.log.Warn("automations: cannot watch a repository", "repository", r, "err", err)
			continue
		}
		fw.repos[r] = rw
		fw.byGit[rw.gitDir] = r
		fw.byGit[rw.commonDir] = r
		fw.addLocked(rw.gitDir)
		fw.addTreeLocked(filepath.Join(rw.commonDir, "refs"))
		fw.addLocked(rw.commonDir)
		if _, ok := fw.refs[r]; !ok {
			fw.refs[r] = readRefs(rw.commonDir)
		}
	}
	for r := range fw.refs {
		if fw.repos[r] == nil {
			delete(fw.refs, r)
		}
	}
}

// Close stops watching. Changes still being debounced are dropped: ahpd
// is stopping, and runs would not start.
func (fw *FSWatcher) Close() error {
	err := fw.w.Close()
	<-fw.done
	return err
}

func (fw *FSWatcher) addLocked(dir string) {
	if fw.dirs[dir] || len(fw.dirs) >= maxWatchedDirs {
		return
	}
	if err := fw.w.Add(dir); err != nil {
		fw.log.Debug("automations: cannot watch a folder", "folder", dir, "err", err)
		return
	}
	fw.dirs[dir] = true
}

// addTreeLocked watches root and its subfolders, but not a .git inside.
func (fw *FSWatcher) addTreeLocked(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" && p != root {
			return filepath.SkipDir
		}
		if len(fw.dirs) >= maxWatchedDirs {
			return filepath.SkipAll
		}
		fw.addLocked(p)
		return nil
	})
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
				return
			}
			// What came due before this change goes out first: a change
			// after a file's quiet time starts an event of its own, and
			// the order does not depend on which channel select took.
			fw.flush()
			for _, out := range fw.handle(ev) {
				if out.Type != TriggerFiles || !fw.deb.add(out, fw.clock.Now()) {
					fw.emit(out)
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
				return
			}
			fw.log.Warn("automations: file watcher", "err", err)
		}
	}
}

// handle turns one fsnotify event into trigger events.
func (fw *FSWatcher) handle(ev fsnotify.Event) []Event {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var out []Event
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && fw.underWatchedLocked(ev.Name) {
			fw.addTreeLocked(ev.Name) // a new folder: watched, then its files found by the next events
		}
	}
	if repo := fw.repoOfLocked(ev.Name); repo != "" {
		now := readRefs(fw.repos[repo].commonDir)
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
	for _, f := range fw.folders {
		if within(f, ev.Name) {
			out = append(out, Event{Type: TriggerFiles, Name: EventFileChanged, Path: ev.Name})
			break
		}
	}
	return out
}

// flush sends the debounced changes due by now.
func (fw *FSWatcher) flush() {
	for _, out := range fw.deb.due(fw.clock.Now()) {
		fw.emit(out)
	}
}

func (fw *FSWatcher) underWatchedLocked(p string) bool {
	for _, f := range fw.folders {
		if within(f, p) {
			return true
		}
	}
	return fw.repoOfLocked(p) != ""
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
