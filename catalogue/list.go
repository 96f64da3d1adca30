package catalogue

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Listing a folder and stating its transcripts is most of a restart's
// work, and the first thing a first scan does before it reads the newest
// files: the folders are listed in parallel, each stat by the goroutine
// that listed its folder, while the index is decoded beside them. Only
// then does the loop goroutine match what was listed to its records.

// folder is a folder of transcripts to list, and its root.
type folder struct {
	dir string
	rt  *root
}

// listed is one transcript a folder's listing found, with its stat.
type listed struct {
	path string
	id   string // the conversation's, from the name
	fid  fileID
	err  error // the stat's
}

// listing is what listing one folder found.
type listing struct {
	folder
	files []listed
	err   error
}

// list lists each folder and stats the transcripts in it, with the
// catalogue's workers. It touches no record, so it may run beside the
// loop's other work.
func (c *Catalogue) list(folders []folder) []listing {
	out := make([]listing, len(folders))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.cfg.Workers, len(folders)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(folders) {
					return
				}
				out[i] = listFolder(folders[i])
			}
		})
	}
	wg.Wait()
	return out
}

// listFolder lists one folder's transcripts, each with its stat.
func listFolder(f folder) listing {
	l := listing{folder: f}
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		l.err = err
		return l
	}
	for _, e := range entries {
		id, ok := f.rt.Format.Name(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		// The stat orders the reads (see readAll): a file that is gone
		// by now sorts last, and its read finds it gone.
		x := listed{path: filepath.Join(f.dir, e.Name()), id: id}
		fi, err := e.Info()
		if err == nil {
			x.fid = idOf(fi)
		}
		x.err = err
		l.files = append(l.files, x)
	}
	return l
}

// match adds to todo the transcripts a listing found that are new or
// changed since they were read, and marks every one in seen (when it is
// not nil).
func (c *Catalogue) match(l listing, seen map[string]bool, todo *[]*fileState) {
	if l.err != nil {
		if !errors.Is(l.err, fs.ErrNotExist) {
			c.warnOnce(l.dir, "catalogue: cannot list folder", l.err)
		}
		return
	}
	rt := l.rt
	for _, x := range l.files {
		if seen != nil {
			seen[x.path] = true
		}
		st := c.files[x.path]
		if st == nil {
			st = c.track(x.path, Key{Provider: rt.Provider, ID: x.id}, rt.parser)
			if ie := c.restored[x.path]; ie != nil && ie.Provider == rt.Provider && ie.ID == x.id {
				// As read at an earlier start: used as it is if the
				// file is unchanged, and as where to read from if not.
				ie.restore(st)
				if x.err == nil && st.unchanged(x.fid) {
					c.st.indexHits.Add(1)
					c.setRow(st, c.rowOf(st))
					continue
				}
			}
		} else if x.err == nil && st.unchanged(x.fid) {
			continue
		}
		st.listed = x.fid.mtime
		*todo = append(*todo, st)
	}
}

// addProject watches a new project folder, then reads what is in it:
// files made between the folder's creation and the watch have no event.
func (c *Catalogue) addProject(ctx context.Context, rt *root, dir string) {
	if !project(dir) {
		return
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return
	}
	c.watch(dir, false)
	var todo []*fileState
	c.match(listFolder(folder{dir: dir, rt: rt}), nil, &todo)
	c.readAll(ctx, todo)
}

// rescan lists every folder and rereads the files whose size or
// modification time moved, or that failed to read last time; files no
// longer listed are dropped. full also renews every watch, for after an
// overflow, when a folder's creation may have been lost. index, when not
// nil, gives the index to restore records from (the first scan's), which
// is waited for only once the folders are listed.
func (c *Catalogue) rescan(ctx context.Context, full bool, index <-chan map[string]*indexEntry) {
	c.st.rescans.Add(1)
	dirs := map[string]bool{}
	var folders []folder
	for _, rt := range c.roots {
		if !rt.Nested {
			if _, err := os.Stat(rt.Dir); err == nil {
				dirs[rt.Dir] = true
				c.watch(rt.Dir, full)
				folders = append(folders, folder{dir: rt.Dir, rt: rt})
			}
			continue
		}
		entries, err := os.ReadDir(rt.Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.warnOnce(rt.Dir, "catalogue: cannot list "+rt.Provider+" projects", err)
			}
			continue
		}
		dirs[rt.Dir] = true
		c.watch(rt.Dir, full)
		for _, e := range entries {
			dir := filepath.Join(rt.Dir, e.Name())
			if !e.IsDir() || !project(dir) {
				continue
			}
			dirs[dir] = true
			c.watch(dir, full)
			folders = append(folders, folder{dir: dir, rt: rt})
		}
	}
	listings := c.list(folders)
	if index != nil {
		c.restored = <-index
		defer func() { c.restored = nil }()
	}
	seen := map[string]bool{}
	var todo []*fileState
	for _, l := range listings {
		c.match(l, seen, &todo)
	}
	for path, st := range c.files {
		if !seen[path] {
			c.drop(st)
		}
	}
	for dir := range c.watched {
		if !dirs[dir] {
			c.unwatch(dir)
		}
	}
	c.readAll(ctx, todo)
	c.checkCwds()
}
