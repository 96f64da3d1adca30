package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Sharing sessions with other hosts (docs/CLUSTER.md). With
// Options.Cluster, a session runs on one host at a time: the one holding
// its lease. A host takes the lease before it does anything that wakes a
// session (route.go decides when), keeps it while the session is awake
// here, and lets it go when the session falls asleep or is disposed.
// Requests for a session another host holds are forwarded to it
// (route.go, forwarded.go). A lease the host loses (it could not renew in
// time) stops the session here: its turns are cancelled and it is put to
// sleep, for the host now holding it has taken over.

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

// clustered reports whether the host shares sessions with others.
func (h *Host) clustered() bool { return h.opts.Cluster != nil }

// hostID is this host's id in the cluster, "" on a host of its own.
func (h *Host) hostID() string {
	if h.opts.Cluster == nil {
		return ""
	}
	return h.opts.Cluster.HostID()
}

// claim takes the lease of session id for this host. It returns "" when
// the host holds it (already or now), or the id of the host that does.
// A session whose lease this host did not hold a moment ago may have run
// elsewhere since: fresh (claimed.go) brings the copy here up to date
// before anything uses it.
func (h *Host) claim(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	for {
		if h.leases.holds(id) {
			return "", nil
		}
		done, busy := h.leases.startClaim(id)
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
	ls, err := h.opts.Cluster.Acquire(ctx, id)
	var held *cluster.HeldError
	switch {
	case errors.As(err, &held):
		if held.Holder == h.hostID() {
			// Ours by an earlier lease this host no longer has in hand
			// (it lost it, and the key has not expired yet): wait for
			// that, as any host would.
			return "", protocol.Errorf(protocol.CodeInternalError, "session %s is being handed over; try again in a few seconds", id)
		}
		return held.Holder, nil
	case err != nil:
		return "", protocol.Errorf(protocol.CodeInternalError, "could not take session %s for this host: %v", id, err)
	}
	if old := h.leases.take(id, nil); old != nil {
		h.releaseLease(old)
	}
	h.dropMirror(id) // its clients here follow the session itself now
	if err := h.fresh(ctx, id); err != nil {
		h.log.Warn("could not bring a claimed session up to date; it runs from what this host had", "session", id, "err", err)
	}
	// Held here only now, with its copy up to date: a request that finds
	// it held uses that copy.
	h.leases.put(id, ls, h.now())
	h.wg.Add(1)
	go h.watchLease(id, ls)
	return "", nil
}

// watchLease stops the session here when its lease is lost.
func (h *Host) watchLease(id string, ls *cluster.Lease) {
	defer h.wg.Done()
	select {
	case <-h.ctx.Done():
		return
	case <-ls.Lost():
	}
	if h.leases.take(id, ls) == nil {
		return // let go on purpose
	}
	h.log.Warn("lost the lease of a session: it stops on this host", "session", id)
	s := h.byID(id)
	if s == nil {
		return
	}
	h.stopHere(s)
}

// stopHere ends what a session does on this host, for a host that lost
// its lease: its turns are cancelled and it falls asleep.
func (h *Host) stopHere(s *session.Session) {
	for _, d := range s.CancelTurns() {
		select {
		case <-d:
		case <-h.ctx.Done():
			return
		}
	}
	if !h.sleep(s, true, false) {
		h.sleep(s, false, false)
	}
}

// unusedLease is how long a lease the host took may go unused: a request
// that took one and then woke nothing (it failed, or only read) leaves it
// held for a session asleep here, which the residency check gives up.
const unusedLease = 30 * time.Second

// releaseUnused gives up the leases of sessions asleep here (or gone),
// taken at least unusedLease ago: a request about to wake one has just
// taken its lease, and keeps it.
func (h *Host) releaseUnused(now time.Time) {
	if !h.clustered() {
		return
	}
	for _, id := range h.leases.takenBefore(now.Add(-unusedLease)) {
		if s := h.byID(id); s != nil {
			if !s.Unused() {
				continue
			}
		}
		h.letGo(id)
	}
}

// letGo gives up the lease of a session that fell asleep or was disposed
// here.
func (h *Host) letGo(id string) {
	if !h.clustered() {
		return
	}
	if ls := h.leases.take(id, nil); ls != nil {
		h.releaseLease(ls)
	}
}

func (h *Host) releaseLease(ls *cluster.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	if err := ls.Release(ctx); err != nil && !errors.Is(err, cluster.ErrLost) && !errors.Is(err, cluster.ErrClosed) {
		h.log.Warn("could not give up a session's lease; it expires on its own", "session", ls.Session(), "err", err)
	}
}

// byID returns the session of an id the host has, or nil.
func (h *Host) byID(id string) *session.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// holderOf answers which host holds a session: "" for none.
func (h *Host) holderOf(ctx context.Context, id string) (string, error) {
	if h.leases.holds(id) {
		return h.hostID(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	holder, err := h.opts.Cluster.Holder(ctx, id)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInternalError, "could not ask the cluster who holds session %s: %v", id, err)
	}
	return holder, nil
}

// clusterStatus answers ahpd/sessionStatus for the cluster: active, with
// the host in _meta, when any host holds the session.
func (h *Host) clusterStatus(ctx context.Context, c *conn.Conn, uri string) (statusResult, error) {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return statusResult{}, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	local, lerr := h.status(c, uri)
	holder, err := h.holderOf(ctx, su.ID)
	if err != nil {
		return statusResult{}, err
	}
	switch {
	case holder != "" && holder != h.hostID():
		// Known to the cluster; whether this client may know of it is
		// the holder's to say for a session this host has no record of.
		if lerr != nil {
			return statusResult{}, lerr
		}
		return statusResult{Status: "active", Meta: hostMeta(holder)}, nil
	case lerr != nil:
		return statusResult{}, lerr
	case holder == h.hostID():
		return statusResult{Status: local, Meta: hostMeta(holder)}, nil
	}
	return statusResult{Status: local}, nil
}

func hostMeta(id string) protocol.Object {
	return protocol.Object{clusterMeta: session.QuoteJSON(id)}
}

// placeFor chooses the host a session with these folders runs on when
// nobody holds it: this one when it can reach them, else the least
// loaded that can (cluster.Place).
func (h *Host) placeFor(ctx context.Context, folders, dead []string) (string, error) {
	if reaches(h.opts.Cluster.Self(), folders) {
		return h.hostID(), nil // no need to ask the cluster
	}
	hosts, err := h.hostsOf(ctx)
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
func (h *Host) hostsOf(ctx context.Context) ([]cluster.Host, error) {
	for {
		ask, cancel := context.WithTimeout(ctx, 2*time.Second)
		hosts, err := h.opts.Cluster.Hosts(ask)
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

// joinCluster serves the requests and notes other hosts send this one.
func (h *Host) joinCluster() error {
	if !h.clustered() {
		return nil
	}
	if err := h.opts.Cluster.Serve(h.serveForwarded); err != nil {
		return fmt.Errorf("host: serving the cluster: %w", err)
	}
	if err := h.opts.Cluster.ServeNotes(h.takeNote); err != nil {
		return fmt.Errorf("host: serving the cluster: %w", err)
	}
	return nil
}

// letGoAll gives up every lease the host holds, for Close: its sessions
// are stopped and written down, and another host may take them at once.
func (h *Host) letGoAll() {
	if !h.clustered() {
		return
	}
	h.leases.mu.Lock()
	held := h.leases.held
	h.leases.held, h.leases.taken = map[string]*cluster.Lease{}, map[string]time.Time{}
	h.leases.mu.Unlock()
	for _, ls := range held {
		h.releaseLease(ls)
	}
	if ls := h.scheduler.Swap(nil); ls != nil {
		h.releaseLease(ls) // another host takes the schedules on at once
	}
}

// schedulerLease is the lease of the host that runs the schedules of the
// automations the hosts declare: declared alike on every host of a
// cluster, they run once, on one host at a time.
const schedulerLease = "ahpd:automations:scheduler"

// schedulerAsk is how often a host not running the schedules asks for
// their lease.
const schedulerAsk = 5 * time.Second

// scheduling reports whether this host runs its automations' schedules
// now: always on a host of its own; on one sharing sessions, while it
// holds the scheduler's lease.
func (h *Host) scheduling() bool { return !h.clustered() || h.scheduler.Load() != nil }

// keepScheduling takes the scheduler's lease when nobody holds it, and
// notices it lost. It runs at start and at every residency check, so the
// schedules move to another host within a check of the lease's expiry.
func (h *Host) keepScheduling() {
	if !h.clustered() {
		return
	}
	if ls := h.scheduler.Load(); ls != nil {
		select {
		case <-ls.Lost():
			h.scheduler.CompareAndSwap(ls, nil)
			h.log.Warn("this host no longer runs the cluster's automation schedules: it lost their lease")
		default:
			return
		}
	}
	// Residency checks run at every poke: the cluster is asked at most
	// every schedulerAsk.
	now := h.now().UnixNano()
	if last := h.schedulerAsked.Load(); last != 0 && now-last < int64(schedulerAsk) {
		return
	}
	h.schedulerAsked.Store(now)
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Second)
	defer cancel()
	ls, err := h.opts.Cluster.Acquire(ctx, schedulerLease)
	if err != nil {
		if !errors.Is(err, cluster.ErrHeld) {
			h.log.Debug("could not ask for the automation schedules' lease", "err", err)
		}
		return
	}
	h.scheduler.Store(ls)
	h.log.Info("this host runs the automation schedules of the cluster")
}
