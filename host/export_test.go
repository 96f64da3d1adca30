package host

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/outbox"
)

// Methods lists the JSON-RPC methods the host serves, for the grants table
// test, which must walk every one.
func Methods() []string { return slices.Sorted(maps.Keys(methods)) }

// Held reports whether the host holds the session uri names, for tests
// that check a read opened nothing.
func (h *Host) Held(uri string) bool { return h.held(uri) != nil }

// AwaitJournal waits until the host counts its journal as failing, or
// as taking its appends again, or ctx ends.
func (h *Host) AwaitJournal(ctx context.Context, failing bool) error {
	for {
		changed := h.health.changed.Load()
		if (h.health.trouble.Load() != nil) == failing {
			return nil
		}
		if changed == nil {
			h.health.moved()
			continue
		}
		select {
		case <-*changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// JournalWaiting is how many agents and clients wait now for their
// session's journal writes, and the most changes any session's outbox
// holds queued.
func (h *Host) JournalWaiting() (waiting int64, backlog int) {
	for _, s := range h.sessionList() {
		backlog = max(backlog, s.Backlog())
	}
	return h.health.waiting.Load(), backlog
}

// MaxBacklog is how many changes a session's outbox queues before its
// agent waits.
const MaxBacklog = outbox.MaxBacklog

// Balance runs a residency check now: quiet sessions sleep, clients away
// too long are forgotten.
func (h *Host) Balance() { h.tick(h.now()) }

// Passes hears the host's residency checks, for tests to wait on one
// instead of sleeping.
type Passes struct {
	mu    sync.Mutex
	began time.Time     // when the latest check began, by the host's clock
	ended chan struct{} // closed when the next check ends
}

// WithPasses has the host tell p of each residency check.
func WithPasses(o *Options, p *Passes) {
	p.ended = make(chan struct{})
	o.residencyPassed = func(began time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.began = began
		close(p.ended)
		p.ended = make(chan struct{})
	}
}

// Latest returns when the latest check began (zero before the first), and
// a channel closed when the next one ends.
func (p *Passes) Latest() (began time.Time, next <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.began, p.ended
}

// WithReleases has the host tell released, without waiting, each time it
// gives memory back to the system.
func WithReleases(o *Options, released chan<- struct{}) {
	o.memoryReleased = func() {
		select {
		case released <- struct{}{}:
		default:
		}
	}
}

// Leaving returns the done channels of clientID's connections: each is
// closed once the host has let go of the connection (its subscriptions
// ended), after the client closes it.
func (h *Host) Leaving(clientID string) []<-chan struct{} {
	var done []<-chan struct{}
	for _, c := range h.connList() {
		if c.Client() == clientID {
			done = append(done, c.Done())
		}
	}
	return done
}

// Stopped returns channels closed once the host stops writing to each of
// clientID's connections: it was cut, or is ending. A cut is counted in
// the metrics by then; the connection may take longer to be done, while
// its peer does not answer the close.
func (h *Host) Stopped(clientID string) []<-chan struct{} {
	var stopped []<-chan struct{}
	for _, c := range h.connList() {
		if c.Client() == clientID {
			stopped = append(stopped, c.Stopped())
		}
	}
	return stopped
}

// DiskFull fails the writes of session records, while it is set, as a
// full disk does: the record's temporary file takes half of what is
// written and refuses the rest with ENOSPC. The store's own clean-up runs
// as it would on a real disk.
type DiskFull struct{ full atomic.Bool }

// Set fills the disk, or frees it.
func (d *DiskFull) Set(full bool) { d.full.Store(full) }

// WithDiskFull has the host's file store write its records through d.
func WithDiskFull(o *Options, d *DiskFull) {
	o.storeTemp = func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		switch {
		case err != nil:
			return nil, err
		case d.full.Load():
			return fullFile{f}, nil
		}
		return f, nil
	}
}

type fullFile struct{ *os.File }

func (f fullFile) Write(p []byte) (int, error) {
	n, _ := f.File.Write(p[:len(p)/2])
	return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

// PeakInLine reports the most requests any open connection has had in its
// line at once.
func (h *Host) PeakInLine() int {
	h.mu.Lock()
	conns := make([]*conn.Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	peak := 0
	for _, c := range conns {
		peak = max(peak, c.PeakInLine())
	}
	return peak
}

// RememberedClients reports how many client ids the host keeps.
func (h *Host) RememberedClients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// SlowDisk holds the writes of session records, while it is held, in
// their sync, as a disk that takes its time does.
type SlowDisk struct {
	mu      chan struct{} // a token: held while it is empty
	entered chan struct{} // a sync has begun
}

// NewSlowDisk returns a disk that syncs at once until Hold.
func NewSlowDisk() *SlowDisk {
	d := &SlowDisk{mu: make(chan struct{}, 1), entered: make(chan struct{}, 64)}
	d.mu <- struct{}{}
	return d
}

// Hold makes syncs wait until Release.
func (d *SlowDisk) Hold() { <-d.mu }

// Release lets the syncs waiting, and later ones, go.
func (d *SlowDisk) Release() { d.mu <- struct{}{} }

// Entered receives as each sync begins.
func (d *SlowDisk) Entered() <-chan struct{} { return d.entered }

// WithSlowDisk has the host's file store write its records through d.
func WithSlowDisk(o *Options, d *SlowDisk) {
	o.storeTemp = func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		if err != nil {
			return nil, err
		}
		return slowFile{f, d}, nil
	}
}

type slowFile struct {
	*os.File
	d *SlowDisk
}

func (f slowFile) Sync() error {
	select {
	case f.d.entered <- struct{}{}:
	default:
	}
	tok := <-f.d.mu
	f.d.mu <- tok
	return f.File.Sync()
}

// Residency says what keeps the session uri names awake, for a test that
// waited in vain for it to sleep.
func (h *Host) Residency(uri string) string {
	s := h.held(uri)
	if s == nil {
		return "not held"
	}
	out, chats := s.Residency(h.now())
	return out + fmt.Sprintf(", watched %v", s.Watched(chats))
}

// CleanKey is the journal mark a clean stop leaves (restart.go).
const CleanKey = cleanKey

// ErrNoRemote is the error a push skipped for want of the remote ends with.
var ErrNoRemote = errNoRemote

// PushEnd is the end of one push of a session's checkpoints.
type PushEnd struct {
	Session string
	Err     error
}

// Pushes hears the host's pushes of checkpoints, for tests to wait on one
// instead of sleeping.
type Pushes struct {
	mu    sync.Mutex
	ends  []PushEnd
	ended chan struct{} // closed when the next push ends
}

// WithPushes has the host push checkpoints to remote and tell p of each
// push's end.
func WithPushes(o *Options, remote string, p *Pushes) {
	o.PushCheckpoints = remote
	p.ended = make(chan struct{})
	o.checkpointsPushed = func(session string, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ends = append(p.ends, PushEnd{session, err})
		close(p.ended)
		p.ended = make(chan struct{})
	}
}

// Ends returns the pushes ended so far, and a channel closed when the
// next one ends.
func (p *Pushes) Ends() ([]PushEnd, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ends), p.ended
}

// WithPushDrain sets how long Close lets pushes of checkpoints finish.
func WithPushDrain(o *Options, d time.Duration) { o.pushDrain = d }

// WithKillWait sets how long Close waits for the agents it killed.
func WithKillWait(o *Options, d time.Duration) { o.killWait = d }

// WithRecordsHeld has the host take no record change from the cluster's
// watch until held is closed.
func WithRecordsHeld(o *Options, held <-chan struct{}) { o.recordsHeld = held }

// Relays is how many relays of other hosts' connections the host keeps.
func (h *Host) Relays() int {
	if p, ok := h.cluster.(interface{ Relays() int }); ok {
		return p.Relays()
	}
	return 0
}

// WithRelayClosed has the host tell closed, without waiting, each time a
// relay of another host's connection has closed.
func WithRelayClosed(o *Options, closed chan<- struct{}) {
	o.relayClosed = func() {
		select {
		case closed <- struct{}{}:
		default:
		}
	}
}

// Settle waits until the session uri names has settled after its last
// change: its outbox handed on, its checkpoints recorded and its record
// written. An assertion about what a turn left behind (a record on disk,
// a checkpoint) made after Settle does not race the host's own work.
func (h *Host) Settle(ctx context.Context, uri string) error {
	s := h.held(uri)
	if s == nil {
		return fmt.Errorf("no session %s held", uri)
	}
	return s.Settle(ctx)
}

// RunsSchedules reports whether the host holds the automation schedules'
// lease of its cluster.
func (h *Host) RunsSchedules() bool { return h.cluster != nil && h.cluster.Scheduling() }
