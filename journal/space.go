package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// What the journal does when the embedded server's disk fills
// (docs/JOURNAL.md, "A full disk").
//
// The server, standalone, takes a write that fails for lack of space as
// a fault of its store: it keeps the error and fails every later write
// of the stream with it, and answers none of them, so a publisher waits
// for an ack that never comes (30 s here). It also bounds its store at
// three quarters of what was free when it started, so a server started
// on a nearly full disk refuses appends for as long as it runs, whatever
// is freed. So the journal sets the server no bound of its own and keeps
// one: an append that would leave less than Config.MinFreeBytes free on
// the store's file system is refused before it is sent (ErrNoSpace),
// which keeps the store from ever failing a write in the common case
// (the journal's own appends fill the disk). When something else fills
// it between two checks and a write does fail, the server logs it; the
// journal watches the server's log for that, fails the appends waiting
// for acks at once with ErrNoSpace, and once there is room again starts
// the server's JetStream again (a few milliseconds; the store is read
// back from disk and loses nothing that was acked), so appends go on
// without a restart of the daemon.

// ErrNoSpace is returned, wrapped, by an append refused or failed for
// lack of disk space: the embedded server's file system has less free
// than Config.MinFreeBytes, or a write of the store failed for lack of
// space, or the server (reached by URL) said it has no room.
var ErrNoSpace = errors.New("journal: no space left for the store")

const (
	// DefaultMinFreeBytes is Config.MinFreeBytes when it is 0: room for
	// what the server writes besides appends (its index of the stream at
	// shutdown, a compressed copy of a full block of 8 MiB, the floor
	// records and purges of a trim).
	DefaultMinFreeBytes = 32 << 20
	// spaceRecheck is how old a check of the free space may be, far from
	// the floor; within spaceNear of it, every append checks.
	spaceRecheck = 100 * time.Millisecond
	spaceNear    = 64 << 20
	// messageOverhead is about what a message costs in the store besides
	// its data (the subject, a header, a checksum).
	messageOverhead = 128
	// noFreeSpace is the least room a write must find, with no floor.
	noFreeSpace = 1 << 20
	// reserveMargin is the least room an AppendReserve leaves.
	reserveMargin = 64 << 10
)

// maxServerStore is the store bound the journal sets the embedded server
// in place of its own (see above): more than any disk.
const maxServerStore = 1 << 55

// reserveFile is the file, in the store's directory, that holds the room
// an AppendReserve may take when something else filled the disk: half the
// floor, made while there is room and let go when it is needed.
const reserveFile = "reserve"

// disk is what the journal knows of its embedded server's file system.
type disk struct {
	dir   string
	floor int64 // MinFreeBytes; negative: none
	// measure is statfs; tests make it see room that is not there, as a
	// check does that another writer outruns.
	measure func(dir string) (int64, error)

	mu      sync.Mutex // held by a check, and across a restart of JetStream
	checked time.Time  // when free was measured
	free    int64      // the bytes free then
	since   int64      // the bytes appended since

	// reserved says reserveFile holds its room (guarded by mu).
	reserved bool

	fmu    sync.Mutex    // guards the rest; never held while calling the server
	failed bool          // a write of the store failed for lack of space
	full   chan struct{} // closed when one did; a new one once JetStream starts again
}

func newDisk(dir string, floor int64) *disk {
	d := &disk{dir: dir, floor: floor, measure: statfs, full: make(chan struct{})}
	if fi, err := os.Stat(d.reservePath()); err == nil && fi.Size() >= d.reserveSize() {
		d.reserved = true
	}
	return d
}

// prepare measures the disk and makes the reserve file if there is room
// for it, as the journal opens.
func (d *disk) prepare() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if free, err := d.measure(d.dir); err == nil {
		d.checked, d.free, d.since = time.Now(), free, 0
		d.keepReserve()
	}
}

func (d *disk) reservePath() string { return filepath.Join(d.dir, reserveFile) }

// reserveSize is the room reserveFile holds: half the floor.
func (d *disk) reserveSize() int64 { return max(0, d.floor/2) }

// keepReserve makes reserveFile when there is room for it beside the
// floor: the room an AppendReserve takes when another program fills the
// disk. Called with mu held, free just measured.
func (d *disk) keepReserve() {
	size := d.reserveSize()
	if d.reserved || size == 0 || d.free-d.since < d.floor+2*size {
		return
	}
	tmp := d.reservePath() + ".tmp"
	if err := writeReserve(tmp, size); err != nil {
		_ = os.Remove(tmp)
		return // tried again at the next measure
	}
	if err := os.Rename(tmp, d.reservePath()); err != nil {
		_ = os.Remove(tmp)
		return
	}
	d.reserved, d.free = true, d.free-size
}

// writeReserve writes size bytes to a new file, so that they are taken
// on the disk (a sparse file would hold none), and syncs it.
func writeReserve(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// useReserve lets reserveFile go, for the room it held. Called with mu
// held; it reports whether there was room to give.
func (d *disk) useReserve() bool {
	if !d.reserved {
		return false
	}
	if err := os.Remove(d.reservePath()); err != nil && !os.IsNotExist(err) {
		return false
	}
	d.reserved = false
	d.checked = time.Time{} // measure again
	return true
}

// writeFailed records that a write of the store failed for lack of
// space, and ends the waits for acks. It is called from the server's
// goroutines (its log) and takes no lock the journal holds while it
// calls the server.
func (d *disk) writeFailed() {
	d.fmu.Lock()
	defer d.fmu.Unlock()
	if !d.failed {
		d.failed = true
		close(d.full)
	}
}

// failedWrite says whether a write of the store failed for lack of
// space (false when the server is not embedded).
func (d *disk) failedWrite() bool {
	if d == nil {
		return false
	}
	failed, _ := d.state()
	return failed
}

// state says whether a write failed, and gives the channel that closes
// when one does.
func (d *disk) state() (bool, chan struct{}) {
	d.fmu.Lock()
	defer d.fmu.Unlock()
	return d.failed, d.full
}

// statfs measures the bytes free on the file system for an unprivileged
// writer.
func statfs(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("journal: free space of the store: %w", err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// How much of the floor an append must leave free (room).
type floorShare int

const (
	noFloor   floorShare = iota // marks and floor records: only noFreeSpace
	fullFloor                   // an Append
	halfFloor                   // an AppendReserve: no floor, and the reserve file's room
)

// room checks that an append of n bytes fits with its share of the floor
// left free, and, when a write of the store failed and there is room
// again, starts JetStream again first. It returns the channel that
// closes when a write fails while the append waits for its acks; nil
// when the server is not embedded.
func (j *Journal) room(ctx context.Context, n int64, share floorShare) (<-chan struct{}, error) {
	d := j.disk
	if d == nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	failed, full := d.state()
	floor := int64(noFreeSpace)
	switch {
	case d.floor > 0 && share == fullFloor:
		floor = d.floor
	case share == halfFloor:
		floor = reserveMargin // what is left is the reserve's to take
	}
	measure := func() error {
		free, err := d.measure(d.dir)
		if err != nil {
			return err
		}
		d.checked, d.free, d.since = time.Now(), free, 0
		d.keepReserve()
		return nil
	}
	if failed || time.Since(d.checked) > spaceRecheck || d.free-d.since-n < floor+spaceNear {
		if err := measure(); err != nil {
			return nil, err
		}
	}
	if d.free-d.since-n < floor && share == halfFloor && d.useReserve() {
		// Another program took the room the floor kept: the reserve's
		// is this append's.
		if err := measure(); err != nil {
			return nil, err
		}
	}
	if free := d.free - d.since; free-n < floor {
		if failed {
			return nil, fmt.Errorf("%w: a write of the store failed for lack of space, and %d bytes are free", ErrNoSpace, free)
		}
		return nil, fmt.Errorf("%w: %d bytes free on the store's file system; %d to append and %d to keep free", ErrNoSpace, free, n, floor)
	}
	if failed {
		if err := j.restartJetStream(ctx); err != nil {
			return nil, err
		}
		_, full = d.state()
	}
	d.since += n
	return full, nil
}

// Room reports, with an error wrapping ErrNoSpace, that the embedded
// server's disk has no room for an Append (reserve false: the floor is
// not free) or even for an AppendReserve (reserve true); nil when it has,
// or when the server is not embedded (its disk is not the journal's to
// measure). It measures the disk when its last measure may be stale.
func (j *Journal) Room(ctx context.Context, reserve bool) error {
	if err := j.check(); err != nil {
		return err
	}
	share := fullFloor
	if reserve {
		share = halfFloor
	}
	_, err := j.room(ctx, 0, share)
	return err
}

// restartJetStream starts the embedded server's JetStream again, which
// reads the store back from disk without the write error it kept. The
// caller holds disk.mu, so no append starts meanwhile; reads and
// followers under way lose their consumers, and followers make new ones.
func (j *Journal) restartJetStream(ctx context.Context) error {
	cfg := j.srv.JetStreamConfig()
	if cfg == nil {
		return errors.New("journal: the embedded server runs no JetStream")
	}
	// EnableJetStream takes the directory the server's store is under.
	cfg.StoreDir = j.cfg.Dir
	j.log.Warn("journal: there is room on the disk again; starting the store again after a write it failed for lack of space")
	if err := j.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("journal: stopping JetStream: %w", err)
	}
	// A write failing from here on is one of the store started again.
	d := j.disk
	d.fmu.Lock()
	d.failed, d.full = false, make(chan struct{})
	d.fmu.Unlock()
	if err := j.srv.EnableJetStream(cfg); err != nil {
		// The next append tries again.
		d.writeFailed()
		return fmt.Errorf("journal: starting JetStream again: %w", err)
	}
	// Followers' consumers went with it: they make new ones now, rather
	// than when they miss the server's heartbeats.
	j.restartMu.Lock()
	close(j.restarts)
	j.restarts = make(chan struct{})
	j.restartMu.Unlock()
	// The journal's handle of the stream names it and holds no state of
	// the server's: it is kept.
	if _, err := j.ensureStreamPatiently(ctx); err != nil {
		return fmt.Errorf("journal: starting JetStream again: %w", err)
	}
	return nil
}

// restarted is closed when the embedded server's JetStream next starts
// again.
func (j *Journal) restarted() <-chan struct{} {
	j.restartMu.Lock()
	defer j.restartMu.Unlock()
	return j.restarts
}

// isNoSpace reports whether the server's answer to an append says it
// has no room: a store failing for lack of space, or its storage bound
// reached.
func isNoSpace(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == 10023 { // insufficient resources: the server's store bound
		return true
	}
	return streamNoSpace(err)
}

// streamNoSpace reports whether the server's answer to a request to make
// or update the stream says it has no room. (Not "insufficient
// resources", which a cluster also answers while too few of its nodes
// are up.)
func streamNoSpace(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == 10047 { // insufficient storage resources available
		return true
	}
	return saysNoSpace(err.Error())
}

// saysNoSpace reports whether a message of the server names a write that
// failed for lack of space.
func saysNoSpace(msg string) bool {
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// serverLog is the embedded server's logger: what it says goes to the
// journal's log (notices at debug level), and a write it failed for lack
// of space is recorded.
type serverLog struct{ j *Journal }

var _ server.Logger = serverLog{}

func (l serverLog) say(level slog.Level, format string, v []any) {
	msg := fmt.Sprintf(format, v...)
	if level >= slog.LevelWarn && l.j.disk != nil && saysNoSpace(msg) {
		l.j.disk.writeFailed()
	}
	l.j.log.Log(context.Background(), level, "journal: NATS: "+msg)
}

func (l serverLog) Noticef(format string, v ...any) { l.say(slog.LevelDebug, format, v) }
func (l serverLog) Warnf(format string, v ...any)   { l.say(slog.LevelWarn, format, v) }
func (l serverLog) Fatalf(format string, v ...any)  { l.say(slog.LevelError, format, v) }
func (l serverLog) Errorf(format string, v ...any)  { l.say(slog.LevelError, format, v) }
func (l serverLog) Debugf(format string, v ...any)  {}
func (l serverLog) Tracef(format string, v ...any)  {}
