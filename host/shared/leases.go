package shared

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// A session runs on one host at a time: the one holding its lease. A host
// takes the lease before it does anything that wakes a session (route.go
// decides when), keeps it while the session is awake here, and lets it go
// when the session falls asleep or is disposed. Requests for a session
// another host holds are forwarded to it (route.go, forwarded.go). A lease
// the host loses (it could not renew in time) stops the session here: its
// turns are cancelled and it is put to sleep, for the host now holding it
// has taken over.

// clusterMeta is the _meta key naming the host that holds a session, in
// ahpd/sessionStatus's answer.
const clusterMeta = "ahpd.host"

// claimTimeout bounds taking a lease: a cluster that cannot answer in
// this time fails the request that needed it.
const claimTimeout = 10 * time.Second

// leases are the sessions this host holds, by session id, with when each
// was taken.
type leases struct {
	mu    lockcheck.Mutex
	held  map[string]*cluster.Lease
	taken map[string]time.Time
	// claiming are the sessions being taken now, each closed when done:
	// a second request for one waits for the first.
	claiming map[string]chan struct{}
}

func newLeases() *leases {
	return &leases{mu: lockcheck.Mutex{Class: "leases"}, held: map[string]*cluster.Lease{},
		taken: map[string]time.Time{}, claiming: map[string]chan struct{}{}}
}

// startClaim makes this caller the one taking session id, or returns the
// channel closed when the one taking it now is done.
func (l *leases) startClaim(id string) (done func(), busy <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.claiming[id]; ok {
		return nil, ch
	}
	ch := make(chan struct{})
	l.claiming[id] = ch
	return func() {
		l.mu.Lock()
		delete(l.claiming, id)
		l.mu.Unlock()
		close(ch)
	}, nil
}

// takenBefore lists the sessions whose leases were taken before t.
func (l *leases) takenBefore(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, at := range l.taken {
		if at.Before(t) {
			out = append(out, id)
		}
	}
	return out
}

func (l *leases) get(id string) *cluster.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[id]
}

// holds reports whether the host holds the session's lease, and it is not
// past its deadline: a lease that could not be renewed in time is another
// host's to take, whatever the renewer has noticed yet. (The deadline is
// on the cluster member's clock, not the host's.)
func (l *leases) holds(id string) bool {
	ls := l.get(id)
	return ls != nil && ls.Live()
}

func (l *leases) put(id string, ls *cluster.Lease, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[id] = ls
	l.taken[id] = now
}

// take forgets the session's lease and returns it, if this one is still
// the one held (nil: any).
func (l *leases) take(id string, want *cluster.Lease) *cluster.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.held[id]
	if ls == nil || (want != nil && ls != want) {
		return nil
	}
	delete(l.held, id)
	delete(l.taken, id)
	return ls
}

// Holds reports whether this host holds the session's lease, live: only
// then does it number the session's actions (the host's replay.go).
func (p *Part) Holds(id string) bool { return p.leases.holds(id) }

// claim takes the lease of session id for this host. It returns "" when
// the host holds it (already or now), or the id of the host that does.
// A session whose lease this host did not hold a moment ago may have run
// elsewhere since: Core.Refresh brings the copy here up to date before
// anything uses it.
func (p *Part) claim(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	for {
		if p.leases.holds(id) {
			return "", nil
		}
		done, busy := p.leases.startClaim(id)
		if done != nil {
			defer done()
			break
		}
		select {
		case <-busy: // taken, or not: look again
		case <-ctx.Done():
			return "", protocol.Errorf(protocol.CodeInternalError, "could not take session %s for this host in time", id)
		}
	}
	ls, err := p.member.Acquire(ctx, id)
	var held *cluster.HeldError
	switch {
	case errors.As(err, &held):
		if held.Holder == p.hostID() {
			// Ours by an earlier lease this host no longer has in hand
			// (it lost it, and the key has not expired yet): wait for
			// that, as any host would.
			return "", protocol.Errorf(protocol.CodeInternalError, "session %s is being handed over; try again in a few seconds", id)
		}
		return held.Holder, nil
	case err != nil:
		return "", protocol.Errorf(protocol.CodeInternalError, "could not take session %s for this host: %v", id, err)
	}
	if old := p.leases.take(id, nil); old != nil {
		p.releaseLease(old)
	}
	// Fenced before its tail is read: nothing a holder before this one
	// appends from now on is taken, so the tail read is the whole of it.
	if err := p.core.Fence(ctx, id); err != nil {
		p.releaseLease(ls)
		return "", protocol.Errorf(protocol.CodeInternalError, "could not take session %s for this host: %v", id, err)
	}
	p.dropMirror(id) // its clients here follow the session itself now
	if err := p.core.Refresh(ctx, id); err != nil {
		p.log.Warn("could not bring a claimed session up to date; it runs from what this host had", "session", id, "err", err)
	}
	// Held here only now, with its copy up to date: a request that finds
	// it held uses that copy.
	p.leases.put(id, ls, p.core.Now())
	p.core.Go(func() { p.watchLease(id, ls) })
	return "", nil
}

// watchLease stops the session here when its lease is lost.
func (p *Part) watchLease(id string, ls *cluster.Lease) {
	select {
	case <-p.core.Context().Done():
		return
	case <-ls.Lost():
	}
	if p.leases.take(id, ls) == nil {
		return // let go on purpose
	}
	p.log.Warn("lost the lease of a session: it stops on this host", "session", id)
	s := p.core.Session(id)
	if s == nil {
		return
	}
	p.stopHere(s)
}

// Fenced stops a session here whose append the journal refused: another
// host claimed it, so this one's lease is gone, whatever its clock says.
func (p *Part) Fenced(id string) {
	if ls := p.leases.take(id, nil); ls != nil {
		p.releaseLease(ls)
	}
	p.log.Warn("another host took a session this one held: it stops on this host", "session", id)
	if s := p.core.Session(id); s != nil {
		p.stopHere(s)
	}
}

// stopHere ends what a session does on this host, for a host that lost
// its lease: its turns are cancelled and it falls asleep.
func (p *Part) stopHere(s *session.Session) {
	for _, d := range s.CancelTurns() {
		select {
		case <-d:
		case <-p.core.Context().Done():
			return
		}
	}
	p.core.Sleep(s)
}

// unusedLease is how long a lease the host took may go unused: a request
// that took one and then woke nothing (it failed, or only read) leaves it
// held for a session asleep here, which the residency check gives up.
const unusedLease = 30 * time.Second

// releaseUnused gives up the leases of sessions asleep here (or gone),
// taken at least unusedLease ago: a request about to wake one has just
// taken its lease, and keeps it.
func (p *Part) releaseUnused(now time.Time) {
	for _, id := range p.leases.takenBefore(now.Add(-unusedLease)) {
		if s := p.core.Session(id); s != nil {
			if !s.Unused() {
				continue
			}
		}
		p.LetGo(id)
	}
}

// LetGo gives up the lease of a session that fell asleep or was disposed
// here.
func (p *Part) LetGo(id string) {
	if ls := p.leases.take(id, nil); ls != nil {
		p.releaseLease(ls)
	}
}

func (p *Part) releaseLease(ls *cluster.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	if err := ls.Release(ctx); err != nil && !errors.Is(err, cluster.ErrLost) && !errors.Is(err, cluster.ErrClosed) {
		p.log.Warn("could not give up a session's lease; it expires on its own", "session", ls.Session(), "err", err)
	}
}

// holderOf answers which host holds a session: "" for none.
func (p *Part) holderOf(ctx context.Context, id string) (string, error) {
	if p.leases.holds(id) {
		return p.hostID(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	holder, err := p.member.Holder(ctx, id)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInternalError, "could not ask the cluster who holds session %s: %v", id, err)
	}
	return holder, nil
}

// Status answers ahpd/sessionStatus for the cluster: active, with the
// host in _meta, when any host holds the session.
func (p *Part) Status(ctx context.Context, c *conn.Conn, uri string) (string, protocol.Object, error) {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return "", nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	local, lerr := p.core.Status(c, uri)
	holder, err := p.holderOf(ctx, su.ID)
	if err != nil {
		return "", nil, err
	}
	switch {
	case holder != "" && holder != p.hostID():
		// Known to the cluster; whether this client may know of it is
		// the holder's to say for a session this host has no record of.
		if lerr != nil {
			return "", nil, lerr
		}
		return "active", hostMeta(holder), nil
	case lerr != nil:
		return "", nil, lerr
	case holder == p.hostID():
		return local, hostMeta(holder), nil
	}
	return local, nil, nil
}

func hostMeta(id string) protocol.Object {
	return protocol.Object{clusterMeta: session.QuoteJSON(id)}
}

// placeFor chooses the host a session with these folders runs on when
// nobody holds it: this one when it can reach them, else the least
// loaded that can (cluster.Place).
func (p *Part) placeFor(ctx context.Context, folders, dead []string) (string, error) {
	if reaches(p.member.Self(), folders) {
		return p.hostID(), nil // no need to ask the cluster
	}
	hosts, err := p.hostsOf(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the cluster's hosts: %w", err)
	}
	hosts = slices.DeleteFunc(hosts, func(x cluster.Host) bool { return slices.Contains(dead, x.ID) })
	chosen, err := cluster.Place(hosts, folders)
	if err != nil {
		return "", err
	}
	return chosen.ID, nil
}

// hostsOf lists the cluster's hosts, asking again while the cluster does
// not answer in time (a NATS node gone, its leaders being elected
// elsewhere), until ctx ends.
func (p *Part) hostsOf(ctx context.Context) ([]cluster.Host, error) {
	for {
		ask, cancel := context.WithTimeout(ctx, 2*time.Second)
		hosts, err := p.member.Hosts(ask)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return hosts, err
		}
	}
}

func reaches(x cluster.Host, folders []string) bool {
	for _, f := range folders {
		if !x.Reaches(f) {
			return false
		}
	}
	return true
}

// LetGoAll gives up every lease the host holds, for Close: its sessions
// are stopped and written down, and another host may take them at once.
func (p *Part) LetGoAll() {
	p.leases.mu.Lock()
	held := p.leases.held
	p.leases.held, p.leases.taken = map[string]*cluster.Lease{}, map[string]time.Time{}
	p.leases.mu.Unlock()
	all := slices.Collect(maps.Values(held))
	if ls := p.scheduler.Swap(nil); ls != nil {
		all = append(all, ls) // another host takes the schedules on at once
	}
	if len(all) == 0 {
		return
	}
	// A cluster that takes no writes (the last NATS node of a cluster
	// stopping: no quorum) would keep each release waiting for
	// claimTimeout, one after the other: it is asked once, and the leases
	// are left to expire.
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	if err := p.member.Quorum(ctx); err != nil {
		n := 0
		for _, ls := range all {
			if ls.Abandon() {
				n++
			}
		}
		p.log.Warn("could not give up this host's session leases: other hosts take those sessions when the leases expire",
			"leases", n, "expireWithin", p.member.LeaseTTL(), "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, ls := range all {
		wg.Go(func() { p.releaseLease(ls) })
	}
	wg.Wait()
}

// schedulerLease is the lease of the host that runs the schedules of the
// automations the hosts declare: declared alike on every host of a
// cluster, they run once, on one host at a time.
const schedulerLease = "ahpd:automations:scheduler"

// schedulerAsk is how often a host not running the schedules asks for
// their lease.
const schedulerAsk = 5 * time.Second

// Scheduling reports whether this host runs its automations' schedules
// now: while it holds the scheduler's lease.
func (p *Part) Scheduling() bool { return p.scheduler.Load() != nil }

// KeepScheduling takes the scheduler's lease when nobody holds it, and
// notices it lost. It runs at start and at every residency check, so the
// schedules move to another host within a check of the lease's expiry.
func (p *Part) KeepScheduling() {
	if ls := p.scheduler.Load(); ls != nil {
		select {
		case <-ls.Lost():
			p.scheduler.CompareAndSwap(ls, nil)
			p.log.Warn("this host no longer runs the cluster's automation schedules: it lost their lease")
		default:
			return
		}
	}
	// Residency checks run at every poke: the cluster is asked at most
	// every schedulerAsk.
	now := p.core.Now().UnixNano()
	if last := p.schedulerAsked.Load(); last != 0 && now-last < int64(schedulerAsk) {
		return
	}
	p.schedulerAsked.Store(now)
	ctx, cancel := context.WithTimeout(p.core.Context(), 2*time.Second)
	defer cancel()
	ls, err := p.member.Acquire(ctx, schedulerLease)
	if err != nil {
		if !errors.Is(err, cluster.ErrHeld) {
			p.log.Debug("could not ask for the automation schedules' lease", "err", err)
		}
		return
	}
	p.scheduler.Store(ls)
	p.log.Info("this host runs the automation schedules of the cluster")
}
