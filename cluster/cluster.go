// Package cluster lets several ahpd hosts share one NATS cluster: it owns
// the host registry (each host's record, renewed by a heartbeat, gone when
// it stops), session leases (which host holds a session, taken atomically
// with a compare-and-set on a JetStream key-value revision, kept alive by
// a renewer, expired by the server when their holder dies), placement
// (which live host should take a session), request forwarding between
// hosts (request-reply on each host's own subject) and shared session
// records (each session's record in a bucket every host reads and
// watches).
//
// It knows nothing of sessions' contents or AHP: a session is an opaque
// name, a host an id with labels, a forwarded request and a session record
// opaque bytes. It must
// not run sessions, decide when to wake or forward one, or own the NATS
// connection: the caller dials it (see Dial) and closes it.
//
// docs/CLUSTER.md describes the design: subjects, buckets, lease times,
// what happens when a host dies, and why two hosts cannot hold a session.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/journal"
)

// Defaults for the zero values of Config.
const (
	DefaultPrefix   = "ahpd"
	DefaultHostTTL  = 15 * time.Second
	DefaultLeaseTTL = 15 * time.Second
	// DefaultMaxMessageBytes bounds a forwarded request and its reply
	// (lowered to the server's maximum payload when that is smaller).
	DefaultMaxMessageBytes = 1 << 20
	// DefaultRequestTimeout bounds a forwarded request whose context has
	// no deadline.
	DefaultRequestTimeout = 10 * time.Second
)

// Limits on what callers may pass.
const (
	// MaxSessionBytes bounds a session's name, as the journal does.
	MaxSessionBytes = journal.MaxSessionBytes
	// MaxLabels bounds a host's labels, MaxLabelBytes each label's key
	// and value together.
	MaxLabels     = 32
	MaxLabelBytes = 1024
	// maxInFlight bounds the forwarded requests a host handles at once;
	// more wait in the subscription's buffer.
	maxInFlight = 64
	// markerTTL is how long the server keeps the marker it writes when a
	// key's TTL ends, so that watchers and compare-and-set see the expiry.
	markerTTL = 30 * time.Second
	// retryInterval is the heartbeat's period while its writes fail.
	retryInterval = time.Second
	// beatWait is how long Close lets a heartbeat in flight finish before
	// cutting it short.
	beatWait = 250 * time.Millisecond
)

// Errors callers can test with errors.Is. The errors returned wrap them
// with the detail.
var (
	ErrClosed      = errors.New("cluster: closed")
	ErrBadName     = errors.New("cluster: bad name")
	ErrBadConfig   = errors.New("cluster: bad config")
	ErrHostIDInUse = errors.New("cluster: host id in use by a live host")
	ErrHeld        = errors.New("cluster: session held by another host")
	ErrLost        = errors.New("cluster: lease lost")
	ErrNoHost      = errors.New("cluster: no live host can take the session")
	ErrNoResponder = errors.New("cluster: host not serving requests")
	ErrTimeout     = errors.New("cluster: request timed out")
	ErrTooLarge    = errors.New("cluster: message too large")
	ErrRemote      = errors.New("cluster: the serving host failed the request")
	ErrNoQuorum    = errors.New("cluster: no quorum")
)

// Config says who this host is and how long its records live.
type Config struct {
	// HostID names this host in the cluster: 1 to 64 letters, digits, '-'
	// or '_'. Required.
	HostID string
	// Labels describe the host for placement (LabelRepos) and people.
	Labels map[string]string
	// Addr is where clients may reach the host directly, if anywhere.
	Addr string

	// Prefix starts this deployment's subjects and bucket names (default
	// DefaultPrefix): the same on hosts that share sessions.
	Prefix string
	// Replicas is the buckets' replica count on a cluster (0 means 1).
	Replicas int

	// HostTTL is how long the host's record lives without a heartbeat,
	// LeaseTTL how long a lease lives without a renewal (defaults 15 s;
	// whole seconds, at least 1 s: the server's TTLs count seconds). The
	// heartbeat and the renewer run every third of the shorter one.
	HostTTL  time.Duration
	LeaseTTL time.Duration

	// MaxMessageBytes bounds a forwarded request and its reply.
	MaxMessageBytes int

	// Clock paces the heartbeat and renewer and dates records (nil: the
	// real clock). The expiry of records is the server's, on its clock.
	Clock clock.Clock
	// Logger receives what goes wrong in the background (nil: slog.Default).
	Logger *slog.Logger
}

// Member is this host's membership of the cluster. Its methods are safe for
// concurrent use.
type Member struct {
	cfg      Config
	log      *slog.Logger
	clk      clock.Clock
	nc       *nats.Conn
	js       jetstream.JetStream
	hosts    jetstream.KeyValue
	leasesKV jetstream.KeyValue
	started  time.Time
	maxMsg   int

	mu     sync.Mutex
	closed bool
	leases map[string]*Lease // by session
	subs   []*nats.Subscription
	// serveCancel ends the context of the requests being handled.
	serveCancel context.CancelFunc
	handles     sync.WaitGroup // forwarded requests being handled
	watches     sync.WaitGroup // WatchRecords' goroutines

	recordsMu sync.Mutex
	recordsKV jetstream.KeyValue // nil until first used (records.go)

	// seen is the host last known to run each session (holders.go): what
	// Holder answers when the leases' bucket cannot.
	seen seenHolders

	stop chan struct{} // closed by Close: ends the heartbeat
	// beating is the context of the heartbeat's writes, cancelled by
	// Close: a beat waiting on a cluster that cannot answer (the last
	// NATS node, with no quorum) does not hold Close up.
	beating   context.Context
	stopBeats context.CancelFunc
	// failing is whether the last heartbeat failed (Healthy).
	failing atomic.Bool
	// noQuorum is Quorum's last failure, nil after a success.
	noQuorum atomic.Pointer[quorumFailure]
	done     chan struct{} // closed when the heartbeat has ended
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Dial connects to the NATS server or cluster cfg.URL names with the
// journal's connect options (its credentials, reconnecting for ever), so
// that one config reaches both. The caller closes the connection.
func Dial(ctx context.Context, cfg journal.Config, name string) (*nats.Conn, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("%w: no NATS URL", ErrBadConfig)
	}
	opts := append(journal.ConnectOptions(cfg), nats.Name(name))
	if deadline, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(deadline)))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to NATS: %w", err)
	}
	return nc, nil
}

// Join announces this host on nc's cluster, creating the buckets when they
// do not exist, and starts the heartbeat that renews its record and its
// leases. It refuses a host id whose record is still live (another host,
// or this one restarted within HostTTL of a crash). The caller must Close
// the member, then nc.
func Join(ctx context.Context, nc *nats.Conn, cfg Config) (*Member, error) {
	if err := normalize(&cfg); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: JetStream: %w", err)
	}
	m := &Member{
		cfg: cfg, log: cfg.Logger, clk: cfg.Clock, nc: nc, js: js,
		leases: map[string]*Lease{},
		stop:   make(chan struct{}), done: make(chan struct{}),
	}
	m.beating, m.stopBeats = context.WithCancel(context.Background())
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.clk == nil {
		m.clk = clock.Real{}
	}
	m.started = m.clk.Now()
	m.maxMsg = cfg.MaxMessageBytes
	if p := int(nc.MaxPayload()); p > 0 && p < m.maxMsg {
		m.maxMsg = p
	}
	if m.hosts, err = m.bucket(ctx, cfg.Prefix+"_hosts", "ahpd hosts"); err != nil {
		return nil, err
	}
	if m.leasesKV, err = m.bucket(ctx, cfg.Prefix+"_leases", "ahpd session leases"); err != nil {
		return nil, err
	}
	if err := m.announce(ctx); err != nil {
		return nil, err
	}
	go m.heartbeat()
	return m, nil
}

// normalize checks cfg and fills in its defaults.
func normalize(cfg *Config) error {
	if !nameRE.MatchString(cfg.HostID) {
		return fmt.Errorf("%w: host id must be 1 to 64 letters, digits, '-' or '_'", ErrBadName)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if len(cfg.Prefix) > 32 || !nameRE.MatchString(cfg.Prefix) {
		return fmt.Errorf("%w: prefix must be 1 to 32 letters, digits, '-' or '_'", ErrBadConfig)
	}
	if len(cfg.Labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels, at most %d", ErrBadConfig, len(cfg.Labels), MaxLabels)
	}
	for k, v := range cfg.Labels {
		if k == "" || len(k)+len(v) > MaxLabelBytes {
			return fmt.Errorf("%w: a label's key is empty or it is over %d bytes", ErrBadConfig, MaxLabelBytes)
		}
	}
	if len(cfg.Addr) > MaxLabelBytes {
		return fmt.Errorf("%w: address over %d bytes", ErrBadConfig, MaxLabelBytes)
	}
	if cfg.Replicas < 0 || cfg.HostTTL < 0 || cfg.LeaseTTL < 0 || cfg.MaxMessageBytes < 0 {
		return fmt.Errorf("%w: negative value", ErrBadConfig)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.HostTTL == 0 {
		cfg.HostTTL = DefaultHostTTL
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	for _, d := range []time.Duration{cfg.HostTTL, cfg.LeaseTTL} {
		if d < time.Second || d%time.Second != 0 {
			return fmt.Errorf("%w: TTL %v is not a whole number of seconds of at least 1 s", ErrBadConfig, d)
		}
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return nil
}

// bucket creates the key-value bucket name, or binds to it when another
// host created it first. Keys carry their own TTL, so the bucket has no
// age limit; the server marks a key's expiry for markerTTL.
func (m *Member) bucket(ctx context.Context, name, desc string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	// Made again when the first try went unanswered: if it was made
	// after all, the second says it exists.
	err := whileSettling(ctx, func() (err error) {
		kv, err = m.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         name,
			Description:    desc,
			History:        1,
			Storage:        jetstream.FileStorage,
			Replicas:       m.cfg.Replicas,
			LimitMarkerTTL: markerTTL,
		})
		return err
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		err = whileSettling(ctx, func() (err error) {
			kv, err = m.js.KeyValue(ctx, name)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", name, err)
	}
	return kv, nil
}

// HostID is this host's id.
func (m *Member) HostID() string { return m.cfg.HostID }

// interval is the heartbeat's period: a third of the shorter TTL, so that
// two heartbeats in a row can fail before anything expires.
func (m *Member) interval() time.Duration {
	return min(m.cfg.HostTTL, m.cfg.LeaseTTL) / 3
}

// heartbeat renews the host's record and its leases every interval until
// Close.
func (m *Member) heartbeat() {
	defer close(m.done)
	failing := false
	for {
		fire, cancel := m.clk.At(m.nextBeat(failing))
		select {
		case <-m.stop:
			cancel()
			return
		case <-fire:
		}
		ctx, done := context.WithTimeout(m.beating, m.interval())
		err := errors.Join(m.putHost(ctx), m.renewAll(ctx))
		done()
		if m.beating.Err() != nil {
			return // cut short by Close: no failure to tell
		}
		// Logged once per run of failures, not once a beat.
		switch {
		case err != nil && !failing:
			m.log.Warn("cluster: heartbeat failing; retrying every second", "host", m.cfg.HostID, "err", err)
		case err == nil && failing:
			m.log.Info("cluster: heartbeat back", "host", m.cfg.HostID)
		}
		failing = err != nil
		m.failing.Store(failing)
	}
}

// Healthy reports whether the host is in the cluster: connected to NATS,
// its heartbeat (its record and its leases) renewed at the last beat.
func (m *Member) Healthy() error {
	select {
	case <-m.stop:
		return errors.New("left the cluster")
	default:
	}
	if !m.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	if m.failing.Load() {
		return errors.New("its heartbeat in the cluster fails")
	}
	return nil
}

// nextBeat is when the heartbeat runs next: an interval from now (a
// second when the last beat failed), or sooner when a lease's deadline
// comes first, so that a lease that could
// not be renewed is found lost at its deadline and not up to an interval
// later.
func (m *Member) nextBeat(failing bool) time.Time {
	step := m.interval()
	if failing {
		// A write that failed (NATS unreachable, a bucket electing a
		// leader) is tried again after a second, not an interval, so that
		// a lease survives a leader's election (4 to 9 s when a node is
		// killed) whenever its deadline allows.
		step = min(step, retryInterval)
	}
	next := m.clk.Now().Add(step)
	m.mu.Lock()
	held := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		held = append(held, l)
	}
	m.mu.Unlock()
	for _, l := range held {
		if d := l.Deadline(); d.Before(next) {
			next = d
		}
	}
	return next
}

// Close stops the heartbeat, the request handlers and the record
// watches (their channels are closed when it returns), releases the
// host's leases and removes its record, so that other hosts may take its
// sessions at once. It does not close the connection. It is safe to call
// more than once.
//
// It takes at most what ctx allows: a cluster that cannot take writes
// (the last NATS node of a cluster going, with no quorum left) is asked
// once, briefly (Quorum), and then not waited for; the error, a
// *LeaveError, says what was left undone and when it undoes itself.
func (m *Member) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	subs, serveCancel := m.subs, m.serveCancel
	m.subs = nil
	held := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		held = append(held, l)
	}
	m.mu.Unlock()
	close(m.stop)
	// A beat in flight is let finish, briefly: one cut short may still be
	// written, and a release then miss its lease's revision. One waiting
	// on a cluster that cannot answer is cut short.
	select {
	case <-m.done:
	case <-time.After(beatWait):
		m.stopBeats()
		<-m.done
	}
	m.stopBeats()
	m.watches.Wait()
	var errs []error
	for _, s := range subs {
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("cluster: stopping serving requests: %w", err))
		}
	}
	if serveCancel != nil {
		serveCancel()
	}
	m.handles.Wait()
	left := &LeaveError{HostTTL: m.cfg.HostTTL, LeaseTTL: m.cfg.LeaseTTL}
	if err := m.Quorum(ctx); err != nil {
		// Every write would wait for ctx to end, one after the other.
		left.Cause, left.Record = err, true
		for _, l := range held {
			if l.Abandon() {
				left.Leases++
			}
		}
		return errors.Join(append(errs, left)...)
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil && !errors.Is(err, ErrLost) {
			left.Leases++
			left.Cause = cmp.Or(left.Cause, err)
		}
	}
	if err := retryBusy(ctx, func() error {
		return m.hosts.Purge(ctx, m.cfg.HostID, jetstream.PurgeTTL(markerTTL))
	}); err != nil {
		left.Record = true
		left.Cause = cmp.Or(left.Cause, fmt.Errorf("cluster: removing host record: %w", err))
	}
	if left.Cause != nil {
		errs = append(errs, left)
	}
	return errors.Join(errs...)
}

// LeaveError is what Close could not do: release some of the host's
// leases, or remove its record. Neither harms: they expire on their own,
// and only then do other hosts take the host's sessions.
type LeaveError struct {
	Leases int  // leases not released
	Record bool // the host's record not removed
	// HostTTL and LeaseTTL are how long those live on at most.
	HostTTL, LeaseTTL time.Duration
	Cause             error // why
}

func (e *LeaveError) Error() string {
	var undone []string
	if e.Leases > 0 {
		undone = append(undone, fmt.Sprintf("release %d session lease(s) (other hosts take those sessions when the leases expire, within %v)", e.Leases, e.LeaseTTL))
	}
	if e.Record {
		undone = append(undone, fmt.Sprintf("remove this host's record (it expires within %v)", e.HostTTL))
	}
	return fmt.Sprintf("cluster: could not %s: %v", strings.Join(undone, " nor "), e.Cause)
}

func (e *LeaveError) Unwrap() error { return e.Cause }

// quorumWait bounds Quorum's question when its context allows longer.
const quorumWait = time.Second

// Quorum reports whether the cluster takes writes now, within a second at
// most: nil, or why not. The last node of a NATS cluster whose other
// nodes stopped has no quorum: a write there is never acknowledged, and
// may wait as long as its context allows; a host about to write there for
// the last time asks this first. It asks by renewing the host's record (a
// read would not do: a leader that lost its quorum answers reads until it
// steps down). A failure is remembered for a while, so that the steps of
// one shutdown ask once.
func (m *Member) Quorum(ctx context.Context) error {
	if m.quorumLost() {
		return m.noQuorum.Load().err
	}
	ctx, cancel := context.WithTimeout(ctx, quorumWait)
	defer cancel()
	if err := m.putHost(ctx); err != nil {
		err = fmt.Errorf("%w: the cluster took no write in %v (%v): without a quorum of its NATS nodes (the others stopped, or out of reach) it takes none", ErrNoQuorum, quorumWait, err)
		m.noQuorum.Store(&quorumFailure{at: m.clk.Now(), err: err})
		return err
	}
	m.noQuorum.Store(nil)
	return nil
}

// quorumLost reports whether Quorum failed a moment ago.
func (m *Member) quorumLost() bool {
	p := m.noQuorum.Load()
	return p != nil && m.clk.Now().Sub(p.at) < quorumMemory
}

// writable fails a write at once while Quorum's failure is remembered: on
// a host leaving a cluster with no quorum, the writes its last steps make
// (records, releases) would each wait their whole timeout for nothing.
func (m *Member) writable() error {
	if m.quorumLost() {
		return m.noQuorum.Load().err
	}
	return nil
}

// quorumMemory is how long Quorum remembers that it failed.
const quorumMemory = 5 * time.Second

type quorumFailure struct {
	at  time.Time
	err error
}

// check refuses calls after Close.
func (m *Member) check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}
