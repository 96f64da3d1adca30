package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// acquireAttempts bounds Acquire's compare-and-set retries when the key
// changes between its read and its write (an expiry or a release racing
// it); past them, another host is busy with the session and wins.
const acquireAttempts = 5

// HeldError is Acquire's answer when another host holds the session. It
// matches ErrHeld with errors.Is.
type HeldError struct {
	// Holder is the id of the host holding the session.
	Holder string
}

func (e *HeldError) Error() string { return "cluster: session held by host " + e.Holder }

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// leaseValue is what a lease key holds.
type leaseValue struct {
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// Lease is this host's hold on one session. It lasts while it is renewed
// (the member's heartbeat renews it, or Renew does) and ends with Release,
// or when it is lost: its key changed or expired, or a renewal did not
// succeed before its deadline. A host must stop acting on a session whose
// lease is lost (Lost is closed) and acquire it again before resuming.
type Lease struct {
	m       *Member
	session string
	key     string
	value   []byte

	mu sync.Mutex // serializes renewals and the release
	// renewing cancels the renewal in flight, if any: Abandon supersedes
	// it, and must not wait for it (on a cluster that cannot answer, up
	// to the heartbeat's interval). Release waits for it: a renewal cut
	// short may still be written, and the release then miss its revision.
	renewing atomic.Pointer[context.CancelFunc]
	rev      uint64 // the revision this host last wrote
	ended    bool   // lost or released
	// deadline is the last successful write's send time + LeaseTTL, in
	// Unix nanoseconds; atomic, so that reading it never waits for a
	// renewal in flight.
	deadline atomic.Int64
	lost     chan struct{}
	lostOnce sync.Once
}

// sessionKey is a session's key in the leases bucket: its name in
// unpadded base64url, which has only characters keys allow and can be
// decoded back.
func sessionKey(session string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(session))
}

func checkSession(session string) error {
	if session == "" || len(session) > MaxSessionBytes {
		return fmt.Errorf("%w: a session name must have 1 to %d bytes (got %d)", ErrBadName, MaxSessionBytes, len(session))
	}
	return nil
}

// Acquire takes session for this host, atomically: it writes the session's
// key only if the key does not exist, or at the revision it read (the
// marker a release or an expiry left). A host that finds the key held gets
// a *HeldError naming the holder; of hosts racing for a free session,
// exactly one wins.
func (m *Member) Acquire(ctx context.Context, session string) (*Lease, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	m.mu.Lock()
	_, mine := m.leases[session]
	m.mu.Unlock()
	if mine {
		return nil, &HeldError{Holder: m.cfg.HostID}
	}
	key := sessionKey(session)
	value, err := json.Marshal(leaseValue{Host: m.cfg.HostID, Since: m.clk.Now().UTC()})
	if err != nil {
		return nil, err
	}
	var rev uint64 // 0: the key must not exist
	for range acquireAttempts {
		sent := m.clk.Now()
		seq, err := m.publishTTL(ctx, m.leasesKV.Bucket(), key, value, m.cfg.LeaseTTL, &rev)
		if err == nil {
			l := &Lease{m: m, session: session, key: key, value: value, rev: seq, lost: make(chan struct{})}
			l.deadline.Store(sent.Add(m.cfg.LeaseTTL).UnixNano())
			return m.register(ctx, l)
		}
		// Busy after retries: a write to the key is still in flight,
		// which settled waits for like a conflict.
		if !conflict(err) && !busy(err) {
			return nil, fmt.Errorf("cluster: acquiring session: %w", err)
		}
		cur, err := m.settled(ctx, key, rev)
		if err != nil {
			return nil, err
		}
		if cur.live {
			m.seen.note(session, holderOf(cur.value))
			return nil, &HeldError{Holder: holderOf(cur.value)}
		}
		rev = cur.rev // the marker a release or an expiry left
	}
	return nil, fmt.Errorf("%w: the session's lease kept changing while acquiring it", ErrHeld)
}

// settled reads key after a compare-and-set at rev failed. On a cluster
// the leader refuses a write that conflicts with one it has accepted but
// not yet stored, so the key may still read at rev (or absent, for rev 0)
// for a moment: it reads again, waiting a little longer each time, until
// the key shows the write that won.
func (m *Member) settled(ctx context.Context, key string, rev uint64) (newest, error) {
	wait := time.Millisecond
	for {
		cur, err := m.last(ctx, m.leasesKV.Bucket(), key)
		if err != nil || cur.rev != rev || wait > time.Second {
			return cur, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return newest{}, fmt.Errorf("cluster: acquiring session: %w", ctx.Err())
		case <-t.C:
		}
		wait *= 2
	}
}

// register records a lease just acquired, unless the member closed
// meanwhile (then it releases it).
func (m *Member) register(ctx context.Context, l *Lease) (*Lease, error) {
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.leases[l.session] = l
	}
	m.mu.Unlock()
	if closed {
		_ = l.Release(ctx)
		return nil, ErrClosed
	}
	return l, nil
}

// holderOf is the host id a lease entry names ("?" if it names none).
func holderOf(value []byte) string {
	var v leaseValue
	if json.Unmarshal(value, &v) != nil || v.Host == "" {
		return "?"
	}
	return v.Host
}

// Holder answers which host holds session: its id, or "" when none does
// (the session is free, or its holder died and the lease expired). It is
// read from the bucket's leader, so it follows every acquisition and
// release acknowledged before it, but it is a snapshot: use Acquire to act
// on it. A leader that does not answer within leaderWait (its node is
// gone and the bucket is electing another, 4 to 9 s) is not waited for:
// the answer is then a replica's, which may miss the last moment's
// changes, or, when no replica answers either (they do not while the
// bucket has no leader), the host last seen running the session (a read
// of its lease, or its record written): the caller asks that host, which
// answers whether it runs the session, or does not answer at all.
func (m *Member) Holder(ctx context.Context, session string) (string, error) {
	if err := m.check(); err != nil {
		return "", err
	}
	if err := checkSession(session); err != nil {
		return "", err
	}
	bucket, key := m.leasesKV.Bucket(), sessionKey(session)
	ask, cancel := context.WithTimeout(ctx, leaderWait)
	cur, err := m.last(ask, bucket, key)
	cancel()
	if err != nil && ctx.Err() == nil && noLeader(err) {
		// The bucket's leader is gone (its node died with its host, a
		// moment ago) and another is not elected yet: a replica's copy
		// names the holder as it was, which is what the caller needs to
		// tell that the holder does not answer, without waiting out the
		// election.
		m.log.Debug("cluster: the leases' leader does not answer; asking a replica", "host", m.cfg.HostID, "err", err)
		var rerr error
		if cur, rerr = m.lastOfAnyReplica(ctx, bucket, key); rerr == nil {
			err = nil
		} else if id := m.seen.get(session); id != "" {
			// The replicas stop answering while their bucket has no
			// leader: the host last seen running the session is the best
			// answer there is, and asking it tells whether it still runs.
			m.log.Debug("cluster: no replica answers either; naming the host last seen running the session",
				"host", m.cfg.HostID, "session", session, "holder", id, "err", rerr)
			return id, nil
		}
	}
	if err != nil {
		return "", err
	}
	if !cur.live {
		m.seen.forget(session)
		return "", nil
	}
	id := holderOf(cur.value)
	m.seen.note(session, id)
	return id, nil
}

// Session is the leased session's name.
func (l *Lease) Session() string { return l.session }

// Deadline is when the lease ends unless renewed: LeaseTTL after the last
// successful write was sent, on the member's clock. The server's own TTL
// starts later (when it stores the write), so the holder stops first.
func (l *Lease) Deadline() time.Time { return time.Unix(0, l.deadline.Load()) }

// Live reports whether the lease holds now: not lost, and before its
// deadline by the member's clock.
func (l *Lease) Live() bool {
	select {
	case <-l.lost:
		return false
	default:
	}
	return l.m.clk.Now().Before(l.Deadline())
}

// Lost is closed when the lease is found lost (not when it is released).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Renew extends the lease by LeaseTTL, on the condition that its key is
// still at the revision this host last wrote: any other write (another
// host's acquisition after an expiry, the expiry's own marker) makes it
// fail with ErrLost, and so does a renewal attempted after the deadline.
// Other errors (NATS unreachable) leave the lease held until its deadline.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.renewing.Store(&cancel)
	defer l.renewing.Store(nil)
	if l.ended {
		return fmt.Errorf("%w: it was released or lost before", ErrLost)
	}
	sent := l.m.clk.Now()
	if !sent.Before(l.Deadline()) {
		l.lose()
		return fmt.Errorf("%w: its deadline passed without a renewal", ErrLost)
	}
	seq, err := l.m.publishTTL(ctx, l.m.leasesKV.Bucket(), l.key, l.value, l.m.cfg.LeaseTTL, &l.rev)
	if conflict(err) {
		l.lose()
		return fmt.Errorf("%w: the lease expired or another host took it", ErrLost)
	}
	if err != nil {
		return fmt.Errorf("cluster: renewing lease: %w", err)
	}
	l.rev = seq
	l.deadline.Store(sent.Add(l.m.cfg.LeaseTTL).UnixNano())
	return nil
}

// Release gives the session up: it removes the key at the revision this
// host last wrote, so that another host can acquire it at once. Releasing
// a lease that was lost meanwhile returns ErrLost.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return fmt.Errorf("%w: it was released or lost before", ErrLost)
	}
	l.ended = true
	l.forget()
	if err := l.m.writable(); err != nil {
		return fmt.Errorf("cluster: releasing lease (it expires on its own): %w", err)
	}
	err := retryBusy(ctx, func() error {
		return l.m.leasesKV.Purge(ctx, l.key, jetstream.LastRevision(l.rev), jetstream.PurgeTTL(markerTTL))
	})
	if conflict(err) {
		l.signalLost()
		return fmt.Errorf("%w: the lease expired or another host took it", ErrLost)
	}
	if err != nil {
		return fmt.Errorf("cluster: releasing lease: %w", err)
	}
	return nil
}

// cancelRenewal ends the renewal in flight, if any.
func (l *Lease) cancelRenewal() {
	if c := l.renewing.Load(); c != nil {
		(*c)()
	}
}

// Abandon ends the lease without writing anything, for a host leaving a
// cluster that cannot take the release (Quorum fails): its key expires on
// its own, LeaseTTL after its last renewal, and other hosts can take the
// session then. It reports whether the lease was held till then.
func (l *Lease) Abandon() bool {
	l.cancelRenewal()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.ended = true
	l.forget()
	return true
}

// lose ends the lease as lost; l.mu is held.
func (l *Lease) lose() {
	l.ended = true
	l.forget()
	l.signalLost()
}

func (l *Lease) signalLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// forget removes the lease from its member's.
func (l *Lease) forget() {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.leases[l.session] == l {
		delete(l.m.leases, l.session)
	}
}

// renewAll renews every lease the member holds. It logs each lease lost
// (once: a lost lease is forgotten) and returns the first other failure.
func (m *Member) renewAll(ctx context.Context) error {
	m.mu.Lock()
	held := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		held = append(held, l)
	}
	m.mu.Unlock()
	var failed error
	for _, l := range held {
		err := l.Renew(ctx)
		switch {
		case errors.Is(err, ErrLost):
			m.log.Warn("cluster: session lease lost", "host", m.cfg.HostID, "err", err)
		case err != nil && failed == nil:
			failed = err
		}
	}
	return failed
}
