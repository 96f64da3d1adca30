package catalogue

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/internal/atomicfile"
)

// The index is what the catalogue knew of each transcript when it last
// saved it: the file's identity (see fileID), where the next read would
// start, and what the lines read so far said. At the next start a file
// whose stat gives the same identity is not read at all, and one that
// only grew is read from where the last read stopped; any other is read
// as if new. So an index can be old but never makes a row stale.
//
// It is one JSON file, replaced whole: written to a temporary file in the
// same folder, synced, and renamed over the old one, so a crash leaves
// the old index or the new, never half of one.

// indexVersion changes whenever what a row is made of changes (the title
// rules, say): an index of another version is not used.
const indexVersion = 1

// indexDelay is how long after a change the index is saved, so a
// session writing its transcript does not rewrite the index each time.
// The first scan's result and Close save it at once.
var indexDelay = 30 * time.Second

type indexFile struct {
	Version int `json:"version"`
	// The folders it was made for, by provider (see rootsOf): an index of
	// other folders is not used.
	Roots map[string]string `json:"roots"`
	Files []indexEntry      `json:"files"`
}

// rootsOf returns each provider's folders, joined by the path list
// separator when it has several.
func rootsOf(roots []*root) map[string]string {
	m := make(map[string]string, len(roots))
	for _, rt := range roots {
		if d, ok := m[rt.Provider]; ok {
			m[rt.Provider] = d + string(filepath.ListSeparator) + rt.Dir
		} else {
			m[rt.Provider] = rt.Dir
		}
	}
	return m
}

type indexEntry struct {
	Path     string `json:"path"`
	Provider string `json:"provider"`
	ID       string `json:"id"`

	Dev      uint64 `json:"dev"`
	Ino      uint64 `json:"ino"`
	Size     int64  `json:"size"`
	Mtime    int64  `json:"mtime"`
	Ctime    int64  `json:"ctime"`
	Offset   int64  `json:"offset"`
	Skipping bool   `json:"skipping,omitzero"`
	Mark     uint64 `json:"mark"`

	Created      int64            `json:"created,omitzero"` // Unix nanoseconds; 0 for none
	Modified     int64            `json:"modified,omitzero"`
	Cwd          string           `json:"cwd,omitzero"`
	Prompt       string           `json:"prompt,omitzero"`
	Command      string           `json:"command,omitzero"`
	Branch       string           `json:"branch,omitzero"`
	Tail         [nSources]string `json:"tail"`
	TailSet      uint8            `json:"tailSet,omitzero"`
	Head         [nSources]string `json:"head"`
	HeadSet      uint8            `json:"headSet,omitzero"`
	Conversation bool             `json:"conversation,omitzero"`
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// entryOf records st.
func entryOf(st *fileState) indexEntry {
	in := &st.info
	return indexEntry{
		Path: st.path, Provider: st.key.Provider, ID: st.key.ID,
		Dev: st.id.dev, Ino: st.id.ino, Size: st.id.size, Mtime: st.id.mtime, Ctime: st.id.ctime,
		Offset: st.offset, Skipping: st.skipping, Mark: st.mark,
		Created: unixNano(in.created), Modified: unixNano(in.modified),
		Cwd: in.cwd, Prompt: in.prompt, Command: in.command, Branch: in.branch,
		Tail: in.tail.text, TailSet: in.tail.set, Head: in.head.text, HeadSet: in.head.set,
		Conversation: in.conversation,
	}
}

// restore gives st what e recorded, as if st had been read then.
func (e *indexEntry) restore(st *fileState) {
	st.id = fileID{dev: e.Dev, ino: e.Ino, size: e.Size, mtime: e.Mtime, ctime: e.Ctime}
	st.offset, st.skipping, st.mark = e.Offset, e.Skipping, e.Mark
	st.info = info{
		created: fromUnixNano(e.Created), modified: fromUnixNano(e.Modified),
		cwd: e.Cwd, prompt: e.Prompt, command: e.Command, branch: e.Branch,
		tail: sources{text: e.Tail, set: e.TailSet}, head: sources{text: e.Head, set: e.HeadSet},
		conversation: e.Conversation,
	}
	st.read = true
}

// loadIndex reads the index, keyed by path. A missing index is no
// error; one that does not decode, or was made for other folders or by
// another version, is ignored with a warning: the scan reads everything.
func (c *Catalogue) loadIndex() map[string]*indexEntry {
	path := c.cfg.IndexPath
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		c.cfg.Logger.Warn("catalogue: cannot read the index, reading every transcript", "path", path, "err", err)
		return nil
	}
	var idx indexFile
	if err := json.Unmarshal(data, &idx, decodeOpts); err != nil {
		c.cfg.Logger.Warn("catalogue: the index does not decode, reading every transcript", "path", path, "err", err)
		return nil
	}
	if idx.Version != indexVersion || !maps.Equal(idx.Roots, rootsOf(c.roots)) {
		c.cfg.Logger.Info("catalogue: the index is of another version or other folders, reading every transcript", "path", path)
		return nil
	}
	m := make(map[string]*indexEntry, len(idx.Files))
	for i := range idx.Files {
		m[idx.Files[i].Path] = &idx.Files[i]
	}
	return m
}

// noteIndex records that the index no longer says what the catalogue
// knows, and arms its save.
func (c *Catalogue) noteIndex() {
	if c.cfg.IndexPath == "" || c.indexDirty {
		return
	}
	c.indexDirty = true
	if c.indexArmed {
		return
	}
	c.indexArmed = true
	c.indexTimer.Reset(indexDelay)
}

// saveIndex writes the index if it changed since it was last written.
// It runs on the loop goroutine, or after it ended.
func (c *Catalogue) saveIndex() {
	if c.indexArmed {
		c.indexTimer.Stop()
		c.indexArmed = false
	}
	if !c.indexDirty {
		return
	}
	idx := indexFile{Version: indexVersion, Roots: rootsOf(c.roots), Files: make([]indexEntry, 0, len(c.files))}
	for _, st := range c.files {
		if st.read && st.err == nil {
			idx.Files = append(idx.Files, entryOf(st))
		}
	}
	if err := writeIndex(c.cfg.IndexPath, &idx); err != nil {
		c.st.indexErrors.Add(1)
		c.warnOnce("index:"+c.cfg.IndexPath, "catalogue: cannot save the index", err)
		return
	}
	c.st.indexSaves.Add(1)
	c.indexDirty = false
}

// writeIndex replaces the file at path with idx: a temporary file in the
// same folder, synced before it is renamed over the old one, and the
// folder synced after, so that after a crash the index is the old one or
// the new one, whole.
func writeIndex(path string, idx *indexFile) (err error) {
	data, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, nil)
}
