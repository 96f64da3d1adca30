package catalogue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Linux has no recursive watch, so the one watcher watches each root and,
// in a nested root, each project folder in it. Its events are hints, not a log:
// inotify merges identical events and drops them all when its queue
// overflows. So an event only says "look at this path again", and the
// file records (offsets, sizes) say what is new there.

// run is the catalogue's goroutine: the first scan, then events,
// rescans and publishes until ctx ends.
func (c *Catalogue) run(ctx context.Context) {
	readyClosed := false
	defer func() {
		c.timer.Stop()
		if c.pageDue {
			close(c.firstPage)
		}
		if !readyClosed {
			close(c.ready)
		}
		close(c.done)
	}()
	// The index is decoded while the folders are listed (see rescan).
	index := make(chan map[string]*indexEntry, 1)
	go func() { index <- c.loadIndex() }()
	c.rescan(ctx, true, index)
	if ctx.Err() != nil {
		return
	}
	c.pagePublished()
	close(c.ready)
	readyClosed = true
	// What the first scan read is saved at once: a daemon killed soon
	// after it started still starts fast the next time.
	c.saveIndex()

	var tick <-chan time.Time
	if c.cfg.RescanInterval > 0 {
		t := time.NewTicker(c.cfg.RescanInterval)
		defer t.Stop()
		tick = t.C
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if c.watcher != nil {
		events, errs = c.watcher.Events, c.watcher.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			c.event(ctx, ev)
			if c.cfg.eventHook != nil {
				c.cfg.eventHook(filepath.Clean(ev.Name))
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			c.watchError(ctx, err)
		case <-tick:
			c.rescan(ctx, false, nil)
		case <-c.timer.C:
			c.armed = false
			c.publish()
		case <-c.indexTimer.C:
			c.indexArmed = false
			c.saveIndex()
		case f := <-c.reqs:
			f()
		}
	}
}

// event looks again at the path an event names.
func (c *Catalogue) event(ctx context.Context, ev fsnotify.Event) {
	c.st.events.Add(1)
	path := filepath.Clean(ev.Name)
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	gone := ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	if c.rootAt(path) != nil {
		if gone {
			// The root itself went; the light rescan finds it again.
			c.dropUnder(path)
			c.unwatch(path)
		}
		return
	}
	if rt := c.rootAt(dir); rt != nil {
		switch {
		case !rt.Nested:
			if id, ok := rt.Format.Name(name); ok {
				c.look(ctx, path, Key{Provider: rt.Provider, ID: id}, rt.parser)
			}
		case gone:
			c.dropUnder(path)
			c.unwatch(path)
		case ev.Has(fsnotify.Create):
			c.addProject(ctx, rt, path)
		}
		return
	}
	if rt := c.rootAt(filepath.Dir(dir)); rt != nil && rt.Nested && project(dir) {
		if id, ok := rt.Format.Name(name); ok {
			c.look(ctx, path, Key{Provider: rt.Provider, ID: id}, rt.parser)
		}
	}
}

// rootAt returns the root whose folder is dir, nil for none.
func (c *Catalogue) rootAt(dir string) *root {
	for _, rt := range c.roots {
		if rt.Dir == dir {
			return rt
		}
	}
	return nil
}

// project reports whether dir, a child of a nested root, is a project
// folder (hidden folders are not).
func project(dir string) bool {
	return !strings.HasPrefix(filepath.Base(dir), ".")
}

// watchError handles the watcher's error channel. An overflow means
// events were lost, so everything is looked at again.
func (c *Catalogue) watchError(ctx context.Context, err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		c.st.overflows.Add(1)
		c.cfg.Logger.Info("catalogue: watcher queue overflowed, rescanning")
		c.rescan(ctx, true, nil)
		return
	}
	c.cfg.Logger.Warn("catalogue: watcher", "err", err)
}

// look rereads one file, tracking it if it is new.
func (c *Catalogue) look(ctx context.Context, path string, k Key, p *format) {
	st := c.files[path]
	if st == nil {
		st = c.track(path, k, p)
	}
	c.readAll(ctx, []*fileState{st})
}

// track starts a record for a file not read yet.
func (c *Catalogue) track(path string, k Key, p *format) *fileState {
	st := &fileState{path: path, key: k, parser: p}
	c.files[path] = st
	c.keys[k] = append(c.keys[k], st)
	c.st.files.Store(int64(len(c.files)))
	return st
}

// drop forgets a file that is gone.
func (c *Catalogue) drop(st *fileState) {
	delete(c.files, st.path)
	list := c.keys[st.key]
	for i, s := range list {
		if s == st {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.keys, st.key)
	} else {
		c.keys[st.key] = list
	}
	c.st.files.Store(int64(len(c.files)))
	if st.row != nil {
		c.markDirty(st.key)
	}
	if st.read {
		c.noteIndex()
	}
}

// dropUnder forgets every file in or below dir.
func (c *Catalogue) dropUnder(dir string) {
	prefix := dir + string(filepath.Separator)
	for path, st := range c.files {
		if len(path) > len(prefix) && path[:len(prefix)] == prefix {
			c.drop(st)
		}
	}
}

// apply records what a read of st found.
func (c *Catalogue) apply(st *fileState, next fileState, err error) {
	switch {
	case errors.Is(err, errGone):
		if c.files[st.path] == st {
			c.drop(st)
		}
		return
	case err != nil:
		c.st.readErrors.Add(1)
		if st.err == nil {
			// Once per file until it reads again: a rescan retries it.
			c.cfg.Logger.Warn("catalogue: cannot read transcript", "path", st.path, "err", err)
			c.noteIndex()
		}
		st.err = err
		c.setRow(st, nil)
		return
	}
	if next.id != st.id || next.offset != st.offset || !st.read || st.err != nil {
		c.noteIndex()
	}
	*st = next
	c.setRow(st, c.rowOf(st))
}

// rowOf returns st's row, nil while it holds no conversation.
func (c *Catalogue) rowOf(st *fileState) *Row {
	if !st.info.conversation {
		return nil
	}
	return c.makeRow(st)
}

// makeRow turns a file's record into its row.
func (c *Catalogue) makeRow(st *fileState) *Row {
	in := &st.info
	r := &Row{
		Provider:    st.key.Provider,
		ID:          st.key.ID,
		Title:       in.title(),
		LastPrompt:  in.tail.text[srcLastPrompt],
		SummaryLine: in.tail.text[srcSummary],
		FirstPrompt: in.firstPrompt(),
		Cwd:         in.cwd,
		Branch:      in.branch,
		CreatedAt:   in.created,
		ModifiedAt:  in.modified,
		Path:        st.path,
		Size:        st.id.size,
		Offset:      st.offset,
	}
	// A transcript whose lines carry no time (or whose last line is too
	// long to read back) is dated by the file.
	if r.ModifiedAt.IsZero() {
		r.ModifiedAt = st.id.modTime()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = r.ModifiedAt
	}
	r.CreatedAt, r.ModifiedAt = r.CreatedAt.UTC(), r.ModifiedAt.UTC()
	if r.Cwd != "" {
		r.CwdExists = c.cwdExists(r.Cwd)
	}
	return r
}

// setRow gives st a new row (nil for none) and marks its key dirty when
// anything about the row moved.
func (c *Catalogue) setRow(st *fileState, r *Row) {
	switch {
	case st.row == nil && r == nil:
		return
	case st.row != nil && r != nil && *st.row == *r:
		return
	}
	st.row = r
	c.markDirty(st.key)
}

// cwdExists reports whether dir is a directory, from a cache the light
// rescan renews.
func (c *Catalogue) cwdExists(dir string) bool {
	ok, known := c.cwds[dir]
	if !known {
		fi, err := os.Stat(dir)
		ok = err == nil && fi.IsDir()
		c.cwds[dir] = ok
	}
	return ok
}

// checkCwds stats every folder rows name again and updates the rows of
// those that appeared or went away. A few hundred folders serve ten
// thousand rows, so this is cheap.
func (c *Catalogue) checkCwds() {
	used := map[string]bool{}
	for _, st := range c.files {
		if st.row != nil && st.row.Cwd != "" {
			used[st.row.Cwd] = true
		}
	}
	changed := map[string]bool{}
	for dir := range used {
		fi, err := os.Stat(dir)
		ok := err == nil && fi.IsDir()
		if was, known := c.cwds[dir]; known && was != ok {
			changed[dir] = true
		}
		used[dir] = ok
	}
	c.cwds = used
	if len(changed) == 0 {
		return
	}
	for _, st := range c.files {
		if st.row != nil && changed[st.row.Cwd] {
			r := *st.row
			r.CwdExists = c.cwds[r.Cwd]
			c.setRow(st, &r)
		}
	}
}

// watch adds dir to the watcher unless it is watched already; renew adds
// it again regardless.
func (c *Catalogue) watch(dir string, renew bool) {
	if c.watcher == nil || (c.watched[dir] && !renew) {
		return
	}
	if err := c.watcher.Add(dir); err != nil {
		c.warnOnce("watch:"+dir, "catalogue: cannot watch folder, relying on rescans", err)
		return
	}
	c.watched[dir] = true
}

// unwatch forgets a folder that is gone. The kernel has dropped its watch
// already, so the watcher's complaint about removing it is expected.
func (c *Catalogue) unwatch(dir string) {
	if !c.watched[dir] {
		return
	}
	delete(c.watched, dir)
	if c.watcher != nil {
		_ = c.watcher.Remove(dir)
	}
}

// warnOnce logs a problem with what once per catalogue.
func (c *Catalogue) warnOnce(what, msg string, err error) {
	if c.warned[what] {
		return
	}
	c.warned[what] = true
	c.cfg.Logger.Warn(msg, "path", what, "err", err)
}
