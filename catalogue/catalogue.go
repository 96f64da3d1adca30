package catalogue

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ahpd/ahpd/plugins"
)

// Config says where the transcripts are and how fresh to keep them.
type Config struct {
	// Roots are the folders of transcripts to list, as the backends that
	// are plugins.TranscriptListers give them. A root whose Dir is ""
	// is passed over; a folder that does not exist yet is looked for
	// again at every light rescan.
	Roots []plugins.TranscriptRoot

	// RescanInterval is how often the light rescan runs: it lists the
	// folders and stats every transcript, and reads only those whose
	// size or modification time moved. It is the safety net under the
	// watcher. Zero means 30 seconds; negative turns it off.
	RescanInterval time.Duration
	// Debounce is how long changes gather before they are published and
	// reported, so a burst of appends makes one report. Zero means 50 ms.
	Debounce time.Duration
	// Workers bounds the files read at once by a scan. Zero means twice
	// GOMAXPROCS (reads block in the kernel as often as they compute).
	Workers int
	// FirstPage is how many of the newest rows the first scan publishes
	// as soon as they are read, before it reads the rest (see first.go
	// and Catalogue.FirstPage). Zero means 500, listSessions' largest
	// page.
	FirstPage int

	// OnChange receives each published batch of changes, in the order
	// Rows sorts them, from the catalogue's own goroutine and after Rows
	// shows them. It must not block for long (it holds up the next
	// publish, never a reader) and must not call Rescan.
	OnChange func([]Change)
	// Logger receives read errors (once per file until it reads again)
	// and watcher trouble. Nil logs nothing.
	Logger *slog.Logger

	// IndexPath is the file where the catalogue keeps, between starts,
	// what it read of each transcript (see index.go), such as
	// <state-dir>/catalogue-index.json; the catalogue alone writes it,
	// replacing it whole. At the next start a transcript whose device,
	// inode, size, modification and change times are as recorded gives
	// its row without being read, and one that grew is read from where
	// the last read stopped. "" keeps no index: every start reads every
	// transcript.
	IndexPath string

	// readHook, when set, runs before every file read; tests slow scans
	// down with it, and make a read fail by returning an error, which
	// root cannot do with file modes.
	readHook func(path string) error
	// eventHook, when set, runs after each watcher event is handled,
	// with its path; tests wait on it rather than on the clock.
	eventHook func(path string)
}

// Catalogue is the set of rows found in backends' transcripts, kept
// fresh by one fsnotify watcher and a periodic light rescan.
//
// Rows, Lookup, Stats and Ready never wait for a scan: they read the
// snapshot the last scan published. Everything else, the file records
// and the watcher, belongs to one goroutine.
type Catalogue struct {
	cfg   Config
	roots []*root
	ctx   context.Context // ends at Close
	snap  atomic.Pointer[snapshot]
	st    counters

	ready chan struct{}
	// firstPage is closed once the first scan has published its newest
	// rows; pageDue, the loop's, says it is still open.
	firstPage chan struct{}
	pageDue   bool
	pageReads int // files the first scan read before its first page
	reqs      chan func()
	stop      context.CancelFunc
	done      chan struct{}
	closing   sync.Once

	watcher *fsnotify.Watcher // nil when inotify could not be had

	// Owned by the loop goroutine.
	files   map[string]*fileState
	keys    map[Key][]*fileState
	watched map[string]bool
	dirty   map[Key]struct{}
	cwds    map[string]bool
	timer   *time.Timer
	armed   bool
	warned  map[string]bool // one-off warnings already logged

	// The index: what it held at start, until the first scan has used
	// it, and whether it needs saving (see index.go).
	restored   map[string]*indexEntry
	indexDirty bool
	indexArmed bool
	indexTimer *time.Timer
}

// root is a folder of transcripts the catalogue lists.
type root struct {
	plugins.TranscriptRoot
	parser *format
}

// snapshot is one published state: rows sorted by Compare, and where
// each key sits. It is never changed once stored.
type snapshot struct {
	rows  []Row
	index map[Key]int
}

// counters are the figures Stats reports.
type counters struct {
	bytesRead      atomic.Int64
	linesSkipped   atomic.Int64
	readErrors     atomic.Int64
	events         atomic.Int64
	rescans        atomic.Int64
	overflows      atomic.Int64
	files          atomic.Int64
	publishes      atomic.Int64
	indexHits      atomic.Int64
	indexSaves     atomic.Int64
	indexErrors    atomic.Int64
	firstPageReads atomic.Int64
}

// Stats are counters for diagnostics and tests.
type Stats struct {
	Files int // transcript files tracked
	Rows  int // rows in the current snapshot
	// BytesRead counts every byte read from transcripts by scans.
	BytesRead int64
	// LinesSkipped counts lines that were read but did not decode:
	// garbage, or cut short. Lines the tail stepped over unread are not
	// counted.
	LinesSkipped int64
	// ReadErrors counts failed reads of files that exist (permission,
	// I/O); such a file has no row.
	ReadErrors int64
	Events     int64 // watcher events handled
	Rescans    int64 // full and light rescans run, the first scan included
	Overflows  int64 // watcher queue overflows, each followed by a rescan
	Publishes  int64 // snapshots published
	// IndexHits counts transcripts whose row came from the index
	// without a read; IndexSaves and IndexErrors the index's writes.
	IndexHits   int64
	IndexSaves  int64
	IndexErrors int64
	// FirstPageReads counts the files the first scan read before it
	// published its first page.
	FirstPageReads int64
}

// Open starts a catalogue: it watches the folders at once, scans them in
// the background and publishes the first snapshot when the scan ends
// (see Ready). Close stops it.
func Open(cfg Config) *Catalogue {
	if cfg.RescanInterval == 0 {
		cfg.RescanInterval = 30 * time.Second
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 50 * time.Millisecond
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.FirstPage <= 0 {
		cfg.FirstPage = defaultFirstPage
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var roots []*root
	for _, r := range cfg.Roots {
		if r.Dir != "" && r.Format != nil {
			r.Dir = filepath.Clean(r.Dir)
			roots = append(roots, &root{TranscriptRoot: r, parser: newFormat(r.Format)})
		}
	}
	c := &Catalogue{
		cfg:       cfg,
		roots:     roots,
		ready:     make(chan struct{}),
		firstPage: make(chan struct{}),
		pageDue:   true,
		reqs:      make(chan func()),
		done:      make(chan struct{}),
		files:     map[string]*fileState{},
		keys:      map[Key][]*fileState{},
		watched:   map[string]bool{},
		dirty:     map[Key]struct{}{},
		cwds:      map[string]bool{},
		warned:    map[string]bool{},
	}
	c.snap.Store(&snapshot{index: map[Key]int{}})
	w, err := fsnotify.NewWatcher()
	if err != nil {
		// Every user shares a small inotify budget; without a watcher
		// the light rescan still finds every change, only later.
		cfg.Logger.Warn("catalogue: no file watcher, relying on rescans", "err", err)
	} else {
		c.watcher = w
	}
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.indexTimer = time.NewTimer(time.Hour)
	c.indexTimer.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx, c.stop = ctx, cancel
	go c.run(ctx)
	return c
}

// Close stops the catalogue and waits for its goroutine. Rows and Lookup
// go on answering from the last snapshot.
func (c *Catalogue) Close() error {
	var err error
	c.closing.Do(func() {
		c.stop()
		<-c.done
		// The loop has ended, so its state is this goroutine's now.
		c.saveIndex()
		if c.watcher != nil {
			err = c.watcher.Close()
		}
	})
	return err
}

// Ready is closed once the first scan is published whole.
func (c *Catalogue) Ready() <-chan struct{} { return c.ready }

// FirstPage is closed once the first scan has published the newest
// Config.FirstPage rows, which it reads first: a listing's first page is
// then what it will be when the scan ends, and the rest follows as
// changes (see first.go). It is closed by Ready at the latest.
func (c *Catalogue) FirstPage() <-chan struct{} { return c.firstPage }

// Rows returns every row of the last published snapshot, most recently
// modified first (see Compare). It never waits: a scan in progress is
// published when it ends. The slice is shared by every caller and must
// not be modified.
func (c *Catalogue) Rows() []Row { return c.snap.Load().rows }

// Lookup returns the row of a provider's session id in the last
// published snapshot.
func (c *Catalogue) Lookup(provider, id string) (Row, bool) {
	s := c.snap.Load()
	i, ok := s.index[Key{Provider: provider, ID: id}]
	if !ok {
		return Row{}, false
	}
	return s.rows[i], true
}

// Stats returns the catalogue's counters.
func (c *Catalogue) Stats() Stats {
	return Stats{
		Files:          int(c.st.files.Load()),
		Rows:           len(c.snap.Load().rows),
		BytesRead:      c.st.bytesRead.Load(),
		LinesSkipped:   c.st.linesSkipped.Load(),
		ReadErrors:     c.st.readErrors.Load(),
		Events:         c.st.events.Load(),
		Rescans:        c.st.rescans.Load(),
		Overflows:      c.st.overflows.Load(),
		Publishes:      c.st.publishes.Load(),
		IndexHits:      c.st.indexHits.Load(),
		IndexSaves:     c.st.indexSaves.Load(),
		IndexErrors:    c.st.indexErrors.Load(),
		FirstPageReads: c.st.firstPageReads.Load(),
	}
}

// ErrClosed is returned by Rescan on a closed catalogue.
var ErrClosed = errors.New("catalogue: closed")

// Rescan lists every folder and rereads every transcript whose size or
// modification time changed, publishes the result and reports it, then
// returns. It is what the catalogue does by itself when the watcher's
// queue overflows.
func (c *Catalogue) Rescan(ctx context.Context) error {
	return c.do(ctx, func() {
		c.rescan(c.ctx, true, nil)
		c.publish()
	})
}

// do runs f on the loop goroutine and waits for it.
func (c *Catalogue) do(ctx context.Context, f func()) error {
	finished := make(chan struct{})
	select {
	case c.reqs <- func() { f(); close(finished) }:
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-finished:
		return nil
	case <-c.done:
		return ErrClosed
	}
}

// markDirty notes that k's row may have changed and arms the debounce
// timer: the publish it leads to reads the state as it is then, so the
// last of a burst of changes is the one reported.
func (c *Catalogue) markDirty(k Key) {
	c.dirty[k] = struct{}{}
	if !c.armed {
		c.armed = true
		c.timer.Reset(c.cfg.Debounce)
	}
}

// current returns the row k has now: of the files that claim k (one,
// unless a session id was copied between project folders), the most
// recently modified.
func (c *Catalogue) current(k Key) *Row {
	var best *Row
	for _, st := range c.keys[k] {
		if st.row != nil && (best == nil || st.row.ModifiedAt.After(best.ModifiedAt)) {
			best = st.row
		}
	}
	return best
}

// publish stores a new snapshot holding the dirty rows' current state and
// reports how they differ from the last one. The old snapshot is copied,
// not changed, so a reader holding it keeps a consistent view.
func (c *Catalogue) publish() {
	if c.armed {
		c.timer.Stop()
		c.armed = false
	}
	if len(c.dirty) == 0 {
		return
	}
	old := c.snap.Load()
	var changes []Change
	// The fresh rows are sorted by pointer: a Row is some hundreds of
	// bytes, and a first scan's ten thousand would be moved about
	// ten times each.
	fresh := make([]*Row, 0, len(c.dirty))
	for k := range c.dirty {
		cur := c.current(k)
		i, had := old.index[k]
		switch {
		case had && cur == nil:
			changes = append(changes, Change{Kind: Removed, Row: old.rows[i]})
		case !had && cur != nil:
			changes = append(changes, Change{Kind: Added, Row: *cur})
		case had && cur != nil:
			if f := diffFields(&old.rows[i], cur); f != 0 {
				changes = append(changes, Change{Kind: Changed, Row: *cur, Fields: f})
			}
		}
		if cur != nil {
			fresh = append(fresh, cur)
		}
	}
	slices.SortFunc(fresh, Compare)

	// Merge the untouched old rows with the fresh ones; both are sorted.
	rows := make([]Row, 0, len(old.rows)+len(fresh))
	j := 0
	for i := range old.rows {
		r := &old.rows[i]
		if _, ok := c.dirty[r.Key()]; ok {
			continue
		}
		for j < len(fresh) && Compare(fresh[j], r) < 0 {
			rows = append(rows, *fresh[j])
			j++
		}
		rows = append(rows, *r)
	}
	for _, r := range fresh[j:] {
		rows = append(rows, *r)
	}
	index := make(map[Key]int, len(rows))
	for i := range rows {
		index[rows[i].Key()] = i
	}
	c.snap.Store(&snapshot{rows: rows, index: index})
	c.st.publishes.Add(1)
	clear(c.dirty)

	if len(changes) > 0 && c.cfg.OnChange != nil {
		slices.SortFunc(changes, func(a, b Change) int {
			if c := Compare(&a.Row, &b.Row); c != 0 {
				return c
			}
			return cmp.Compare(a.Kind, b.Kind)
		})
		c.cfg.OnChange(changes)
	}
}
