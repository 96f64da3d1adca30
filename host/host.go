// Package host is ahpd's session host. It owns the sessions as a whole:
// their registry, the store of their records (files in
// the state directory, or the cluster's records), loading and recovering
// them, the residency checks across them, and the journal every action a
// session emits is written to before any client is sent it (journal.go).
// It owns the JSON-RPC surface (rpc.go: the method table, and the checks
// before each handler) and admits connections over WebSocket, stdio and
// in-process streams (Connect), each a conn.Conn; with a cluster, each
// method runs on the host that holds its session or on the host the
// connection is on, as package host/shared declares (its route table).
//
// One session, its chats and everything that changes them are package
// session's: the host reaches a session only through its methods, and the
// session reaches the host through session.Env (sessionhost.go). It knows
// no backend's details: agents are reached through package plugins, a
// chat's turns are run by package chats, a change's effects leave through
// package outbox, frames are numbered and handed out by package fanout and
// written by package conn, and git is reached through packages worktree
// and checkpoints. What listSessions shows (the order of the sessions,
// the catalogue's external rows, pages and cursors) is package
// host/listing's, given its hooks in catalogue.go. Sharing sessions with
// other hosts is package host/shared's: a part the host holds only with a
// cluster, plugged into the hooks the host defines (clusterpart.go),
// reaching the host through clusterCore (clustercore.go).
package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/listing"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/host/retries"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/host/shared"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Options configure a Host.
type Options struct {
	// StateDir is where the file store keeps sessions.
	StateDir string
	// Sessions is "file" (the default) or "memory".
	Sessions string
	// Journal, when set, is where every action a session emits is written
	// before any client is sent it (journal.go, docs/JOURNAL.md). The
	// caller opens it and closes it after Close; nil keeps none.
	Journal *journal.Journal
	// Backends are the agent runtimes sessions run on.
	Backends *plugins.Registry
	// DefaultProvider picks the provider of a session whose maker names
	// none (createSession without one, an automation's template without
	// one): the daemon's choice, or an error saying why there is none,
	// which refuses the session (default_provider.go). nil takes the
	// first backend registered.
	DefaultProvider func() (string, error)
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
	// Replay is how many changes are kept for reconnecting clients.
	Replay int
	// Version is ahpd's version, for serverInfo.
	Version string
	// Collectors are more metrics MetricsHandler serves with the host's
	// (the HTTP API's, in the daemon).
	Collectors []prometheus.Collector
	// DefaultDirectory is the directory a session works in when the
	// client names none; empty means the home directory.
	DefaultDirectory string
	// TurnWindow is how many finished turns of a chat are held in its
	// state; older ones are paged in with fetchTurns.
	TurnWindow int
	// SleepAfter is how long a session stays quiet before its agents are
	// let go; 0 keeps them.
	SleepAfter time.Duration
	// ResidencyLimit is how many sessions may be resident at once; 0
	// means no limit.
	ResidencyLimit int
	// Transcripts are the backends whose transcripts list sessions this
	// host never ran (catalogue.go); the zero value lists none.
	Transcripts Transcripts
	// WorktreesRoot is where worktree sessions' trees go, as
	// <root>/<repo>/<name>; "" puts them beside their repository, as
	// <repo>.worktrees/<name>.
	WorktreesRoot string
	// AllowedRoots are the directories sessions may work in (roots.go):
	// absolute paths of existing directories. Empty lets sessions work
	// anywhere. The default directory, when outside them, becomes the
	// first.
	AllowedRoots []string
	// Auth says who a connection acts for and holds the users directory;
	// nil is a host with no users directory, where everyone is root. When
	// its directory is a grants.Notifier, open connections are rechecked
	// at each change and those it no longer accepts closed (revoke.go).
	Auth *grants.Authenticator
	// ConnectionsPerPerson bounds the WebSocket connections one person
	// holds open at once (budgets.go); 0 means 64.
	ConnectionsPerPerson int
	// ClientWindow is how long a client whose connections all closed is
	// remembered, for it to reconnect; 0 means ten minutes.
	ClientWindow time.Duration
	// Limits bound what one connection may use; the zero value is the
	// defaults.
	Limits conn.Limits
	// AgentProcesses, when set, counts the agent processes running, for
	// /metrics: the backends start them, and the host does not know how.
	AgentProcesses func() int64
	// Clock is the host's time: what it stamps, and when residency checks
	// run (residency.go). nil is the wall clock; tests move a fake one,
	// which must not read earlier than it did in a run before a restart:
	// serverSeq continues from it.
	Clock clock.Clock
	// Automations configure the automations the host runs (automations.go).
	Automations AutomationOptions
	// Cluster, when set, is this host's membership of a cluster of hosts
	// sharing sessions (package host/shared, docs/CLUSTER.md): a session
	// runs on the host holding its lease, and the others forward to it.
	// The caller joins it, with the Journal on the same NATS, and closes
	// it after Close. nil is a host of its own.
	Cluster *cluster.Member
	// Permissions are the permissions of a session whose config sets
	// none: what its agents' tool calls may do without a person
	// confirming them (docs/PERMISSIONS.md). The zero value asks for
	// everything. New refuses permissions that do not check.
	Permissions plugins.Permissions
	// InputTimeout is the inputTimeout of a session whose config sets
	// none: how long a turn may wait for a person (a tool call to
	// confirm, a question) before it is stopped with an inputTimeout
	// error. 0 waits for ever; otherwise 1s to 720h.
	InputTimeout time.Duration
	// PushCheckpoints, when set, is the remote (a remote's name, looked up
	// in each session's repository, or a URL) every session's checkpoints
	// are pushed to as they are recorded, and fetched from when a session
	// this host wakes lacks them (pushes.go). "" pushes nothing.
	PushCheckpoints string
	// Events, when set, is told what somebody outside may want to know
	// of (events.go): turns that wait on a person or end, automation runs
	// that end. nil tells nobody.
	Events events.Sink

	// storeTemp makes the temporary files session records are written
	// through; nil means os.CreateTemp. Tests set it (export_test.go) to
	// fail writes as a full disk does, which no test can safely arrange.
	storeTemp createTemp
	// residencyPassed, when set, is told after each residency check when
	// it began, by Clock. Tests set it (export_test.go) to wait for a
	// check instead of sleeping.
	residencyPassed func(began time.Time)
	// memoryReleased, when set, is told each time the host gives memory
	// back (memory.go), for tests to wait on.
	memoryReleased func()
	// relayClosed, when set, is told each time a relay of another host's
	// connection has closed (host/shared's forwarded.go), for tests to
	// wait on.
	relayClosed func()
	// checkpointsPushed, when set, is told after each push of a session's
	// checkpoints (pushes.go), with its error, for tests to wait on.
	checkpointsPushed func(session string, err error)
	// pushDrain, when set, replaces pushDrainWindow, for tests of a push
	// that never ends.
	pushDrain time.Duration
	// killWait, when set, replaces stopWindow as how long Close waits for
	// what it killed before it gives up on it, for tests: on a loaded
	// machine a killed turn takes more than a second to end.
	killWait time.Duration
	// recordsHeld, when set, holds back the cluster's record changes from
	// the watch until it is closed (a watch slower than any request).
	recordsHeld <-chan struct{}
}

// Host serves sessions to clients.
type Host struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	slots   personSlots  // the connections each person holds (budgets.go)
	reads   journalReads // the timeline and replay reads running (reads.go)
	ctx     context.Context
	stop    context.CancelFunc
	bus     *fanout.Bus
	store   store
	writer  *recordWriter // writes records off the sessions' locks
	env     *session.Env  // what its sessions share of it (sessionhost.go)
	trees   *worktree.Manager
	cursors listing.Cursors // sign the cursors of listSessions
	metrics *metrics
	roots   []string // Options.AllowedRoots, resolved

	mu       lockcheck.Mutex
	sessions map[string]*session.Session // by session id
	order    *listing.Order              // the same sessions in listing order
	conns    map[*conn.Conn]struct{}
	nextConn int64
	clients  map[string]*client // by client id (clients.go)
	// taken is the clientSeqs of the client actions taken, so a client's
	// action sent again is not applied again (rpc_dispatch.go).
	taken *retries.Table
	// clientRev counts changes to clients, for their notes (clientnotes.go).
	clientRev uint64
	homes     map[string]string // moved chat URI -> the id of the session it lives in (movechat.go)
	// fenced holds the URIs of sessions whose appends the journal refused
	// since this host last claimed them: another host took them; unclaimed
	// the ids of sessions taken before the host had a copy to claim
	// (fenced.go).
	fenced, unclaimed sync.Map
	closing           bool
	pokes             chan struct{} // asks for a residency check

	rootMu      lockcheck.Mutex // guards root, unavailable and rootOut
	rootOut     *outbox.Outbox  // what root's changes ask of the rest of the host (outbox.go)
	root        *protocol.RootState
	unavailable map[string]string // provider -> why it cannot run

	// ext is the external sessions: the catalogue and what listings
	// show of it (catalogue.go gives it what it needs of the host).
	ext *listing.External

	wg sync.WaitGroup // background work that must end before Close returns

	// storeErrors counts the writes to the store that failed (store.go).
	storeErrors atomic.Uint64
	// hostRules are the root config's approval keys, as agents take them
	// (hostrules.go); nil when they decide nothing.
	hostRules atomic.Pointer[plugins.HostRules]
	autoReply atomic.Bool // root config's autoReplyEnabled
	// mcpServers is root config's mcpServers, as agents take them.
	mcpServers atomic.Pointer[jsontext.Value]
	// health is whether the journal takes the host's appends
	// (journal.go); marks find a serverSeq in the journal (replay.go).
	health journalHealth
	gate   appendGate // the journal's entries in flight (appendgate.go)
	marks  journalMarks
	// clientNotes orders the writes of the clients' notes (clientnotes.go).
	clientNotes clientNotes

	// unrestoredTrees are the trees of stored records that could not be
	// made sessions again, which no sweep may take (orphans.go); guarded
	// by mu.
	unrestoredTrees map[string]bool

	autos *automationHost // automations.go

	// loadingOwn gathers the conversations of the sessions loadSessions
	// makes, to note as the host's own in one go; nil after.
	loadingOwn *[]catalogue.Key

	// cluster is the part sharing sessions with other hosts (package
	// host/shared, through the hooks of clusterpart.go): nil without
	// Options.Cluster.
	cluster clusterPart
	pushes  *pusher // nil without Options.PushCheckpoints (pushes.go)
}

// New returns a Host with the sessions its store holds: its options
// filled (fill), its parts made (newHost), and then started (start).
func New(opts Options) (*Host, error) {
	roots, err := opts.fill()
	if err != nil {
		return nil, err
	}
	// With a cluster, the records are kept in its bucket.
	var st store = storeOf{shared.NewRecords(opts.Cluster)}
	if opts.Cluster == nil {
		if st, err = openStore(opts.Sessions, opts.StateDir, opts.Logger, opts.storeTemp); err != nil {
			return nil, err
		}
	}
	newest := newestSeq(opts)
	h := newHost(opts, roots, st, newest)
	if err := h.start(newest); err != nil {
		return nil, err
	}
	return h, nil
}

// fill gives every option left zero its default, checks what cannot be
// defaulted, and resolves the allowed roots.
func (opts *Options) fill() (roots []string, err error) {
	if opts.Backends == nil {
		opts.Backends = plugins.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Replay <= 0 {
		opts.Replay = 4096
	}
	if opts.TurnWindow <= 0 {
		opts.TurnWindow = 200
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if err := opts.Limits.Validate(); err != nil {
		return nil, err
	}
	if err := checkPermissionOptions(opts); err != nil {
		return nil, err
	}
	opts.Limits = opts.Limits.WithDefaults()
	if n := opts.Limits.IdentifierBytes; n > 0 {
		protocol.SetIdentifierLimits(n, n)
	}
	if opts.ConnectionsPerPerson <= 0 {
		opts.ConnectionsPerPerson = defaultConnectionsPerPerson
	}
	if opts.ClientWindow <= 0 {
		opts.ClientWindow = defaultClientWindow
	}
	if opts.Auth == nil {
		name, _ := os.Hostname()
		opts.Auth = &grants.Authenticator{Host: name}
	}
	if opts.DefaultDirectory == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("host: no default directory: %w", err)
		}
		opts.DefaultDirectory = home
	}
	roots, err = ResolveRoots(opts.AllowedRoots)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if opts.PushCheckpoints != "" {
		if err := checkpoints.CheckRemote(opts.PushCheckpoints); err != nil {
			return nil, fmt.Errorf("host: pushing checkpoints: %w", err)
		}
	}
	if dir := defaultInRoots(roots, opts.DefaultDirectory); dir != opts.DefaultDirectory {
		opts.Logger.Info("the default directory is outside the allowed roots: using the first root", "default", opts.DefaultDirectory, "root", dir)
		opts.DefaultDirectory = dir
	}
	return roots, nil
}

// newHost makes the host's parts, starting nothing; newest is the
// journal's newest serverSeq, or 0.
func newHost(opts Options, roots []string, st store, newest int64) *Host {
	ctx, stop := context.WithCancel(context.Background())
	giving, giveUp := context.WithCancel(ctx)
	h := &Host{
		mu:          lockcheck.Mutex{Class: "host"},
		rootMu:      lockcheck.Mutex{Class: "root"},
		rootOut:     outbox.New(protocol.RootURI),
		marks:       journalMarks{mu: lockcheck.Mutex{Class: "marks"}},
		clientNotes: clientNotes{mu: lockcheck.Mutex{Class: "client notes"}},
		opts:        opts,
		log:         opts.Logger,
		now:         opts.Clock.Now,
		ctx:         ctx,
		stop:        stop,
		bus:         fanout.New(opts.Replay, firstSeq(opts, newest)),
		trees:       worktree.NewManager(opts.WorktreesRoot, opts.Logger),
		store:       st,
		cursors:     listing.NewCursors(),
		metrics:     newMetrics(),
		roots:       roots,
		sessions:    map[string]*session.Session{},
		order:       listing.NewOrder(),
		conns:       map[*conn.Conn]struct{}{},
		clients:     map[string]*client{},
		taken:       retries.New(),
		homes:       map[string]string{},
		pokes:       make(chan struct{}, 1),
		health:      journalHealth{giving: giving, giveUp: giveUp},
		root:        &protocol.RootState{ActiveSessions: new(int64(0)), Config: emptyRootConfig()},

		unavailable: map[string]string{},
	}
	h.bus.OnRefused(h.actionRefused)
	h.bus.SetLanes(laneOf)
	if opts.Cluster != nil {
		h.cluster = shared.New((*clusterCore)(h), opts.Cluster, shared.Options{RelayClosed: opts.relayClosed, RecordsHeld: opts.recordsHeld})
	}
	h.ext = h.newExternal()
	h.writer = newRecordWriter(st, func() { h.storeErrors.Add(1) })
	h.pushes = newPusher(opts.PushCheckpoints, opts.Logger, func() { h.metrics.pushErrors.Add(1) }, opts.checkpointsPushed)
	h.env = h.sessionEnv()
	return h
}

// start brings the host up: its sessions loaded, the catalogue, the
// automations and the cluster opened, its goroutines running. What it
// starts it stops, in reverse, when a later step fails: a failed start
// leaves nothing running.
func (h *Host) start(newest int64) error {
	opts := h.opts
	var started []func()
	unwind := func(err error) error {
		for _, stop := range slices.Backward(started) {
			stop()
		}
		return err
	}
	// The writer and the pusher run from newHost on.
	started = append(started, h.writer.close, h.pushes.close)
	// The host's goroutines (the trees' sweep, the cluster's watches) end
	// with its context.
	started = append(started, func() { h.stop(); h.wg.Wait() })
	h.trees.SetRecords(treeOwner(opts), h.treeRecorded)
	h.checkBackends()
	h.root.Agents = h.agentsLocked()
	// serverSeq continues across restarts: it starts from the clock in
	// microseconds, which no earlier run of this host can have reached, so
	// a client's lastSeenServerSeq from before a restart is never mistaken
	// for one of this run.
	// A host sharing sessions brings back none from the journal as it
	// starts: they may run elsewhere now. The host that next takes one
	// reads its tail then (shared's claim).
	var err error
	if h.cluster != nil {
		err = h.cluster.Follow()
	}
	if err == nil {
		err = h.loadSessions(opts.Cluster != nil || h.stoppedCleanly(newest))
	}
	if err != nil {
		return unwind(err)
	}
	h.loadClients()
	h.openCatalogue()
	started = append(started, func() { _ = h.ext.Close() })
	if opts.Cluster == nil {
		// Another host may have made a tree this one has no record of yet.
		h.sweepTrees()
	}
	if h.cluster != nil {
		h.cluster.KeepScheduling() // before the automations' first pass
		started = append(started, h.cluster.LetGoAll)
	}
	if err := h.openAutomations(); err != nil {
		return unwind(err)
	}
	started = append(started, h.closeAutomations)
	if h.cluster != nil {
		if err := h.cluster.Join(); err != nil {
			return unwind(err)
		}
	}
	h.wg.Add(3)
	go h.watchdog()
	go h.keepResidency(h.now())
	go h.watchUsers()
	if opts.Cluster == nil {
		h.sendLeftQueued()
	}
	return nil
}

// watchdog ends connections past a deadline, and those whose writes
// stall: a client that stopped reading must not keep its writer, or its
// queue, forever.
func (h *Host) watchdog() {
	defer h.wg.Done()
	tick := time.NewTicker(h.opts.Limits.Tick())
	defer tick.Stop()
	var mem memoryWatch
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
			conns := h.connList()
			now := h.now()
			for _, c := range conns {
				c.Check(now)
			}
			h.giveBackMemory(now, &mem)
		}
	}
}

// loadSessions makes a session of every record in the store, and of its
// journal's tail unless the host stopped cleanly last time (restart.go).
// Sessions come back asleep: their agents start on their next turn.
func (h *Host) loadSessions(clean bool) error {
	recs, err := h.store.load()
	if err != nil {
		return fmt.Errorf("host: reading sessions: %w", err)
	}
	tails := map[string]*session.Recovered{}
	if !clean {
		tails = h.recoverAll(recs)
	}
	var own []catalogue.Key
	h.loadingOwn = &own
	defer func() {
		h.loadingOwn = nil
		h.ext.NoteOwn(own)
	}()
	var (
		cut   []*session.Session
		stale = map[*session.Session]bool{}
	)
	for _, rec := range recs {
		rc := tails[rec.URI]
		s, err := h.restore(rec, rc)
		if err != nil {
			h.log.Warn("skipping stored session", "session", rec.URI, "err", err)
			if rec.Tree != nil {
				if h.unrestoredTrees == nil {
					h.unrestoredTrees = map[string]bool{}
				}
				h.unrestoredTrees[filepath.Clean(rec.Tree.Path)] = true
			}
			continue
		}
		h.sessions[s.ID()] = s
		h.order.Add(s)
		if rc != nil {
			h.marks.note(s.URI(), rc.Mark.ServerSeq, rc.Mark.Seq)
			cut = append(cut, s)
			stale[s] = rc.Stale
		}
		for _, cr := range rec.Chats {
			if cu, err := protocol.ParseChatURI(cr.URI); err == nil && cu.Session != rec.URI {
				h.homes[cr.URI] = s.ID() // a chat moved here from another session
			}
		}
	}
	h.log.Info("sessions loaded", "count", len(h.sessions), "fromJournal", len(tails))
	if j := h.opts.Journal; j != nil && len(cut) > 0 && errors.Is(j.Room(h.ctx, true), journal.ErrNoSpace) {
		// On a full disk the cut turns' ends wait for room: the host
		// starts all the same, to serve what it has.
		h.log.Warn("the disk that holds the journal is full: the turns a stop cut end once there is room", "sessions", len(cut))
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.endCutTurns(cut, stale)
		}()
		return nil
	}
	h.endCutTurns(cut, stale)
	return nil
}

// stopWindow is how long agents get at Close, once the turns still
// running were cancelled, to end them and exit before they are killed;
// and then how long the host waits for what it killed before it gives up
// on it.
const stopWindow = time.Second

// outboxDrain bounds the wait at Close for the sessions' outboxes to hand
// on what the shutdown queued (a journal that fails gives up its appends
// past the grace, so they drain).
const outboxDrain = 10 * time.Second

// Close ends every connection, stops every session's turns and agents,
// and closes the catalogue: the steps of shutdownSteps, in order. The Host
// cannot be used after.
//
// The sessions stop all at once. From the start no turn starts; running
// turns get until ctx ends to finish on their own, then are cancelled,
// and every agent is let go (an idle one at once). Whatever still runs
// stopWindow after ctx ended is killed: an agent that ignores the cancel
// and the end of its stdin does not hold the shutdown up. So Close takes
// at most the time ctx allows plus stopWindow, and one more stopWindow
// for a backend whose agents cannot be killed (plugins.Killer). Close
// returns once every step has run, with what went wrong.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	h.closing = true
	h.mu.Unlock()
	// Past the grace, a journal that fails is not waited for.
	defer context.AfterFunc(ctx, h.health.stopTrying)()
	var errs []error
	for _, step := range h.shutdownSteps() {
		start := time.Now()
		if err := step.run(ctx); err != nil {
			errs = append(errs, err)
		}
		// Where a slow stop spends its time, for --log-level debug.
		if took := time.Since(start); took > 100*time.Millisecond {
			h.log.Debug("shutdown step took a while", "step", step.name, "took", took.Round(time.Millisecond))
		}
	}
	return errors.Join(errs...)
}

// shutdownStep is one step of Close.
type shutdownStep struct {
	name string // what it stops, for a reader of the list
	run  func(ctx context.Context) error
}

// shutdownSteps is what Close does, in order: what makes work (runs,
// agents) stops first; then what records it (checkpoints, restart points,
// the outboxes) finishes; then what others see of it (leases, pushes, the
// catalogue, relays, connections); then the host's own goroutines, the
// writer last, so that every change handed to it is written.
func (h *Host) shutdownSteps() []shutdownStep {
	do := func(f func()) func(context.Context) error {
		return func(context.Context) error { f(); return nil }
	}
	// The cluster part's steps, on a host that has one.
	part := func(f func(clusterPart)) func(context.Context) error {
		return func(context.Context) error {
			if h.cluster != nil {
				f(h.cluster)
			}
			return nil
		}
	}
	var sessions []*session.Session // those there are once no run makes more
	return []shutdownStep{
		{"automations", do(h.closeAutomations)}, // its runs end now, recorded as stopped by the shutdown
		{"sessions", do(func() { sessions = h.sessionList() })},
		{"agents", func(ctx context.Context) error { return h.stopAgents(ctx, sessions) }},
		// The turns' checkpoints follow them; past ctx they are cancelled.
		{"checkpoints", func(ctx context.Context) error { awaitCaptures(ctx, sessions); return nil }},
		{"restart points", do(func() { h.writeRestartPoints(sessions) })},
		{"outboxes", do(func() { awaitOutboxes(sessions, outboxDrain) })},
		{"leases", part(clusterPart.LetGoAll)},
		// The checkpoints just recorded are pushed, within a bound.
		{"pushes", do(func() { h.pushes.drain(cmp.Or(h.opts.pushDrain, pushDrainWindow)) })},
		{"catalogue", func(context.Context) error { return h.ext.Close() }},
		{"relays", part(clusterPart.CloseRelays)},
		{"connections", do(h.endConnections)},
		{"journal retries", do(h.health.stopTrying)},
		{"background work", do(h.stop)},
		{"mirrors", part(clusterPart.CloseMirrors)},
		{"the last checkpoints", do(func() { awaitCaptures(context.Background(), sessions) })},
		{"pusher", do(h.pushes.close)},
		// Every change has been handed to the writer: what it still holds
		// is written before Close returns.
		{"writer", do(h.writer.close)},
		{"goroutines", do(h.wg.Wait)},
		{"clean stop mark", func(ctx context.Context) error { h.markStoppedCleanly(ctx); return nil }},
	}
}

// stopAgents stops every session's agents, in parallel: asked to stop,
// then, once ctx is done and stopWindow more has gone by, killed.
func (h *Host) stopAgents(ctx context.Context, sessions []*session.Session) error {
	for _, s := range sessions {
		s.Hold()
	}
	kill, killNow := context.WithCancel(context.Background())
	defer killNow()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, s := range sessions {
		wg.Go(func() {
			if err := s.Shutdown(ctx, kill); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		if !closedWithin(stopped, stopWindow) {
			h.log.Warn("agents did not stop in time; killing them", "window", stopWindow)
			killNow()
			if !closedWithin(stopped, cmp.Or(h.opts.killWait, stopWindow)) {
				mu.Lock()
				errs = append(errs, errors.New("some agents did not stop even when killed; leaving them"))
				mu.Unlock()
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(errs...)
}

// awaitCaptures waits for the sessions' captures in flight, or ctx.
func awaitCaptures(ctx context.Context, sessions []*session.Session) {
	for _, s := range sessions {
		if !s.AwaitCapturesCtx(ctx) {
			return
		}
	}
}

// closedWithin waits up to d for ch to close, and reports whether it did.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func (h *Host) connClosed(c *conn.Conn) {
	for _, ch := range c.Subscriptions() {
		h.bus.Unsubscribe(c, ch)
	}
	if id := c.Client(); id != "" {
		h.leaveClient(id)
		if !h.clientConnected(id) {
			h.dropActiveClient(id)
		}
	}
	h.poke()
	if h.cluster != nil {
		h.cluster.ConnClosed(c)
	}
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.metrics.closed.Add(1)
	h.wg.Done()
}

// connList returns the open connections.
func (h *Host) connList() []*conn.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	conns := make([]*conn.Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	return conns
}

// newConnection registers a connection on a transport, acting for p: one
// no change to the users directory withdraws.
func (h *Host) newConnection(t conn.Transport, stdio bool, p grants.Principal) (*conn.Conn, error) {
	return h.admit(t, stdio, grants.Credential{Principal: p}, "")
}

// admit registers a connection on a transport, acting for who cred names;
// from is the host whose connection it stands for, or "".
func (h *Host) admit(t conn.Transport, stdio bool, cred grants.Credential, from string) (*conn.Conn, error) {
	for {
		// Checked again here: a token revoked since the handshake read the
		// directory is refused. A change to the directory after this check
		// and before the connection is registered is seen below, and the
		// check made again; one after it, the recheck it sets off finds the
		// connection registered (revoke.go).
		changed := h.opts.Auth.Changed()
		if err := h.opts.Auth.Recheck(cred); err != nil {
			return nil, err
		}
		if c, again, err := h.register(t, stdio, cred, from, changed); !again {
			return c, err
		}
	}
}

// register makes and registers a connection, unless the host is closing
// or the users directory changed since changed was taken (again).
func (h *Host) register(t conn.Transport, stdio bool, cred grants.Credential, from string, changed <-chan struct{}) (c *conn.Conn, again bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, false, errors.New("ahpd is shutting down")
	}
	select {
	case <-changed:
		return nil, true, nil
	default:
	}
	h.nextConn++
	c = conn.New(h.ctx, conn.Config{
		ID: h.nextConn, Transport: t, Stdio: stdio,
		Principal: cred.Principal, Credential: cred, ForwardedFrom: from,
		Limits: h.opts.Limits, Clock: h.opts.Clock, Log: h.log,
		Attached: isSessionURI,
		OnCut:    h.metrics.cutFor,
		OnClosed: h.connClosed,
	})
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	return c, false, nil
}

// session returns the session a session URI (either form) names, when c
// may see it: a provisional session is its creator's alone.
func (h *Host) session(c *conn.Conn, uri string) (*session.Session, error) {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	s := h.held(uri)
	if s == nil && su.Provider() != "" && h.ext.Await(c.Context()) {
		s = h.openExternal(su)
	}
	if s == nil || !s.VisibleTo(c) {
		return nil, protocol.Errorf(protocol.CodeSessionNotFound, "no session %s", uri)
	}
	return s, nil
}

// byID returns the session of an id the host has, or nil.
func (h *Host) byID(id string) *session.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// held returns the session a session URI names among those the host
// holds, opening nothing; nil if none or the URI is not one.
func (h *Host) held(uri string) *session.Session {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return nil
	}
	return h.byID(su.ID)
}

// chat returns the session and chat a chat URI names, when c may see them.
func (h *Host) chat(c *conn.Conn, uri string) (*session.Session, *session.ChatEntry, error) {
	cu, err := protocol.ParseChatURI(uri)
	if err != nil {
		return nil, nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	s := h.chatHome(uri)
	if s == nil || !s.VisibleTo(c) {
		if s, err = h.session(c, cu.Session); err != nil {
			return nil, nil, err
		}
	}
	e := s.ChatOf(uri)
	if e == nil {
		return nil, nil, protocol.Errorf(protocol.CodeNotFound, "no chat %s in session %s", uri, s.URI())
	}
	return s, e, nil
}

// sessionList returns the sessions sorted most recently modified first.
func (h *Host) sessionList() []*session.Session {
	h.mu.Lock()
	list := make([]*session.Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		list = append(list, s)
	}
	h.mu.Unlock()
	return list
}

// addActive moves root's count of sessions running a turn.
func (h *Host) addActive(delta int64) {
	h.rootMu.Lock()
	defer h.unlockRoot()
	n := delta
	if h.root.ActiveSessions != nil {
		n += *h.root.ActiveSessions
	}
	h.applyRootLocked(&protocol.RootActiveSessionsChangedAction{ActiveSessions: max(n, 0)}, nil)
}

// applyRootLocked applies a root action and publishes it when it changed
// the state. The caller holds rootMu.
func (h *Host) applyRootLocked(a protocol.Action, origin *protocol.ActionOrigin) bool {
	next := protocol.ReduceRoot(h.root, a)
	if next == h.root {
		return false
	}
	h.root = next
	h.rootOut.Publish(protocol.RootURI, a, origin)
	return true
}
