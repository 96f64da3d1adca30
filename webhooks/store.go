package webhooks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/internal/atomicfile"
)

// The deliveries that wait, kept across restarts: an append-only file of
// JSON lines under Options.Dir, one record as a delivery is queued
// ("add", with its body) and one as it ends ("done": delivered, given up
// or dropped). A writer goroutine appends and syncs them, off the path of
// Event; once the file holds four times what still waits, it is written
// anew (a temporary file, synced, renamed over it, the directory synced),
// and so at every start, which also drops a line a crash left half
// written. An event handed over just before a crash, not yet written, is
// lost: the host never waits for the disk.

const storeFile = "pending.jsonl"

// compactAt is the smallest file that is compacted while ahpd runs.
const compactAt = 64 << 10

// record is one line of the file.
type record struct {
	Op      string          `json:"op"` // add or done
	Webhook string          `json:"webhook"`
	ID      string          `json:"id"`
	Key     string          `json:"key,omitempty"`
	Event   events.Kind     `json:"event,omitempty"`
	Session string          `json:"session,omitempty"`
	Created time.Time       `json:"created,omitzero"`
	Body    json.RawMessage `json:"body,omitempty"`
}

// store is the file and what waits to be written to it.
type store struct {
	dir, path string

	// Guarded by the dispatcher's lock.
	ops  [][]byte // lines not yet written, in order
	live int64    // bytes of the add records of the deliveries kept

	// The writer's own.
	f      *os.File
	size   int64
	broken bool // a write failed: the next writes the file anew
	warned bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// addLocked queues dl's add record. Called with the dispatcher's lock.
func (st *store) addLocked(h *hook, dl *delivery) {
	line, _ := json.Marshal(record{Op: "add", Webhook: h.w.Name, ID: dl.id, Key: dl.key, Event: dl.event, Session: dl.session, Created: dl.created, Body: dl.body})
	dl.line = append(line, '\n')
	st.live += int64(len(dl.line))
	st.ops = append(st.ops, dl.line)
	st.poke()
}

// doneLocked queues dl's done record. Called with the dispatcher's lock.
func (st *store) doneLocked(h *hook, dl *delivery) {
	if dl.line == nil {
		return
	}
	line, _ := json.Marshal(record{Op: "done", Webhook: h.w.Name, ID: dl.id})
	st.live -= int64(len(dl.line))
	dl.line = nil
	st.ops = append(st.ops, append(line, '\n'))
	st.poke()
}

func (st *store) poke() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// load reads what waited when the last dispatcher on dir stopped, queues
// it again for the webhooks that are still configured (by name) and still
// want its event, writes the file anew with that, and starts the writer.
func (d *Dispatcher) load(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	st := &store{dir: dir, path: filepath.Join(dir, storeFile), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	recs, bad, err := readRecords(st.path)
	if err != nil {
		return fmt.Errorf("webhooks: reading the deliveries that waited: %w", err)
	}
	if bad > 0 {
		d.log.Warn("webhooks: lines of the deliveries that waited could not be read, and are skipped", "file", st.path, "lines", bad)
	}
	byName := map[string]*hook{}
	for _, h := range d.hooks {
		byName[h.w.Name] = h
	}
	d.mu.Lock()
	d.st = st
	kept, gone := 0, 0
	for _, r := range recs {
		h := byName[r.Webhook]
		if h == nil || !h.w.wants(r.Event) {
			gone++
			continue
		}
		dl := &delivery{id: r.ID, key: r.Key, event: r.Event, session: r.Session, created: r.Created, body: []byte(r.Body), next: d.clock.Now()}
		d.enqueueLocked(h, dl)
		st.addLocked(h, dl)
		kept++
	}
	lines := d.liveLinesLocked()
	st.ops = nil
	d.mu.Unlock()
	if kept > 0 || gone > 0 {
		d.log.Info("webhooks: deliveries that waited when ahpd stopped", "resumed", kept, "droppedForWebhooksNoLongerConfigured", gone)
	}
	if err := st.rewrite(lines); err != nil {
		return fmt.Errorf("webhooks: keeping the deliveries that wait: %w", err)
	}
	go d.write()
	return nil
}

// readRecords reads the file's live add records, in the order they were
// added, and how many lines it could not read.
func readRecords(path string) ([]record, int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	type ref struct{ webhook, id string }
	var adds []record
	at := map[ref]int{}
	bad := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == "" || r.Webhook == "" {
			bad++
			continue
		}
		k := ref{r.Webhook, r.ID}
		switch r.Op {
		case "add":
			if len(r.Body) == 0 {
				bad++
				continue
			}
			at[k] = len(adds)
			adds = append(adds, r)
		case "done":
			if i, ok := at[k]; ok {
				adds[i].ID = "" // taken out below, keeping the order
				delete(at, k)
			}
		default:
			bad++
		}
	}
	if err := sc.Err(); err != nil {
		bad++ // a line longer than any record: the rest is past it
	}
	out := adds[:0]
	for _, r := range adds {
		if r.ID != "" {
			out = append(out, r)
		}
	}
	return out, bad, nil
}

// liveLinesLocked are the add records of every delivery kept, oldest
// first: what a file written anew holds. Called with the lock held.
func (d *Dispatcher) liveLinesLocked() [][]byte {
	var lines [][]byte
	for _, h := range d.hooks {
		for _, dl := range h.order {
			if !dl.done && dl.line != nil {
				lines = append(lines, dl.line)
			}
		}
	}
	return lines
}

// write is the writer: it writes what was queued, as it is queued, until
// close; then what is left.
func (d *Dispatcher) write() {
	st := d.st
	defer close(st.done)
	for {
		select {
		case <-st.wake:
			d.flush()
		case <-st.stop:
			d.flush()
			return
		}
	}
}

// flush writes the records queued: appended, or the file written anew
// when it has grown well past what it keeps, or a write failed.
func (d *Dispatcher) flush() {
	st := d.st
	d.mu.Lock()
	ops := st.ops
	st.ops = nil
	var lines [][]byte
	anew := st.broken || (st.size > compactAt && st.size > 4*st.live)
	if anew {
		lines = d.liveLinesLocked()
	}
	d.mu.Unlock()
	var err error
	switch {
	case anew:
		err = st.rewrite(lines)
	case len(ops) > 0:
		err = st.append(ops)
	}
	switch {
	case err != nil && !st.warned:
		st.warned = true
		d.log.Warn("webhooks: could not keep the deliveries that wait; they are sent all the same, but a restart forgets them", "file", st.path, "err", err)
	case err == nil && st.warned && anew:
		st.warned = false
		d.log.Info("webhooks: keeping the deliveries that wait again", "file", st.path)
	}
}

// append writes lines at the end of the file and syncs it.
func (st *store) append(lines [][]byte) error {
	if st.f == nil {
		st.broken = true
		return errors.New("the file is not open")
	}
	n, err := st.f.Write(bytes.Join(lines, nil))
	st.size += int64(n)
	if err == nil {
		err = st.f.Sync()
	}
	if err != nil {
		st.broken = true // a line may be half written: the next write starts afresh
	}
	return err
}

// rewrite writes the file anew with lines, atomically, and opens it to
// append to.
func (st *store) rewrite(lines [][]byte) error {
	st.broken = true
	data := bytes.Join(lines, nil)
	if err := atomicfile.Write(st.path, data, nil); err != nil {
		return err
	}
	if st.f != nil {
		_ = st.f.Close()
	}
	var err error
	st.f, err = os.OpenFile(st.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		st.f = nil
		return err
	}
	st.size, st.broken = int64(len(data)), false
	return nil
}

// close stops the writer once it has written what is queued.
func (st *store) close() error {
	close(st.stop)
	<-st.done
	var err error
	if st.broken {
		err = errors.New("webhooks: the deliveries that wait could not all be kept")
	}
	if st.f != nil {
		if cerr := st.f.Close(); err == nil {
			err = cerr
		}
		st.f = nil
	}
	return err
}
