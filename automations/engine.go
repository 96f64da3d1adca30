package automations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// Defaults of Options.
const (
	DefaultHistoryLimit = 50
	// DefaultMaxActive bounds one automation's runs in progress at once:
	// a trigger that fires while it is reached is skipped, a manual run
	// refused, so a slow run cannot pile up behind a fast schedule.
	DefaultMaxActive = 4
	// MaxChain bounds how many automations an event can start in a row
	// (a run's session finishing starts another's run, and so on), so
	// two automations triggering each other stop.
	MaxChain = 8
	// DefaultMaxPerOwner bounds the automations one person may make
	// (Options.MaxPerOwner): generous for a team's use, but each one is a
	// file kept, a schedule looked at each pass and maybe a watch, so one
	// member's script cannot make the host's work unbounded.
	DefaultMaxPerOwner = 100
)

// Runner executes a run: it creates a session from the definition's
// template as the owner, sends the definition's message, and returns when
// the turn has ended. It calls req.SessionCreated once the session exists
// and before it sends the message. When ctx is cancelled it cancels the
// turn and returns.
type Runner interface {
	Run(ctx context.Context, req RunRequest) Outcome
}

// RunRequest is one run handed to the Runner.
type RunRequest struct {
	Owner          string
	Automation     protocol.URI
	Run            protocol.URI
	Definition     protocol.AutomationDefinition
	SessionCreated func(session protocol.URI)
}

// Outcome is how a run's turn ended: Err nil when it completed.
type Outcome struct {
	Err   error
	Usage *protocol.UsageInfo
}

// Change is one thing the engine changed, for the host to publish. Entry
// is an automation's whole new state (automation/set); Removed names a
// removed automation; Run is a run's new state, with Action the
// automationRun/* action that made it (nil for a run just created).
type Change struct {
	Owner   string
	Entry   *protocol.AutomationEntry
	Removed protocol.URI
	Run     *protocol.AutomationRunState
	Action  protocol.Action
}

// Options configure an Engine. The zero value is valid: nothing kept, the
// wall clock, no runner (every run fails saying so).
type Options struct {
	Dir          string // where automations are kept; "" keeps nothing
	Clock        Clock
	Runner       Runner
	OnChange     func(Change) // called in order, holding none of the engine's locks, from one goroutine at a time; it must not call the engine
	HistoryLimit int          // ended runs kept per automation
	MaxActive    int          // runs in progress per automation
	// MaxPerOwner is how many automations one owner may have; making
	// one more over the protocol (Create) is refused, saying so. 0 is
	// DefaultMaxPerOwner. The host itself (IsHostOwner: root, or nobody on
	// a host without users) is not limited, and the config file's
	// automations (SetDeclared) are never refused: they count, but the
	// host's admin wrote them. Automations kept from before a lower
	// limit stay.
	MaxPerOwner int
	// Scheduling, when set, says whether this engine runs its schedules'
	// occurrences now: of several hosts declaring the same automations,
	// one does (the host decides which). An occurrence due while it says
	// no passes without a run. nil runs them all. It is called holding the
	// engine's lock, so it must answer at once.
	Scheduling func() bool
	// Claim, when set, is asked before a schedule occurrence runs, and
	// the run starts only when it answers true: it records the occurrence
	// on a store the hosts running these automations share, the first
	// host to record it winning (claims.go). An occurrence let pass while
	// Scheduling said no is claimed if Scheduling says yes within two
	// minutes of it. It is called holding none of the engine's locks,
	// with a context ending at Close; an error is tried again. nil runs
	// every occurrence Scheduling allows.
	Claim func(ctx context.Context, o Occurrence) (bool, error)
	// Watch makes the file and ref watcher; nil uses NewFSWatcher, on
	// the engine's clock, with Debounce and WatchBudget. The engine calls
	// its Set when what the triggers watch changes, and its Check before
	// it takes a trigger.
	Watch func(WatchSink) (Watcher, error)
	// Debounce is how long a file must be left alone before its changes
	// make one file-changed event (WatcherOptions.Debounce): 0 is
	// DefaultDebounce.
	Debounce time.Duration
	// WatchBudget is the most folders the file and git ref triggers of
	// everyone on the host watch together (WatcherOptions.Budget): 0 is
	// DefaultWatchBudget. WatchShare is the most one owner's triggers
	// watch together (a folder two of them watch counts once): 0 is
	// DefaultWatchShare; it is at most WatchBudget. A trigger whose
	// folders would take its owner past their share is refused when it
	// is made or changed; one that cannot be watched later (its tree grew
	// past the share, the budget is spent by watches that came first, its
	// folder is gone, the system refused) fires for nothing and says why
	// in its automation's entry (_meta "ahpd.watchError", logged once).
	// The host itself (IsHostOwner) has no share: the budget alone bounds
	// it.
	WatchBudget int
	WatchShare  int
	Logger      *slog.Logger
}

// Watcher watches folders and repositories for the event triggers; it
// sends their events, and its problems, to the WatchSink it was made
// with.
type Watcher interface {
	// Set replaces what is watched, in the order watches came first.
	Set(watches []Watch)
	// Check says why w would be refused by its owner's share now (an
	// error that is ErrWatchShare), without watching it; nil when it
	// fits, or when only watching it will tell.
	Check(w Watch) error
	Close() error
}

type key struct {
	owner string
	uri   protocol.URI
}

type automation struct {
	rec    *record
	c      *compiled
	passed map[string][]time.Time  // per schedule trigger, the occurrences another host was to run (Claim), oldest first; not kept
	watch  map[string]WatchProblem // per event trigger, why its watch does not work, as the watcher last said; not kept
}

// active is a run in progress.
type active struct {
	cancel          context.CancelFunc
	cancelRequested bool
}

// Engine evaluates the triggers of every owner's automations and runs
// them. One mutex guards all of it; runs execute on goroutines of their
// own, outside it.
type Engine struct {
	opts    Options
	clock   Clock
	store   *store
	log     *slog.Logger
	watcher Watcher
	setMu   sync.Mutex // one refreshWatches at a time, so a later Set is never overtaken by an earlier

	mu      sync.Mutex
	told    telling // the changes not yet reported, and who reports them (guarded by mu)
	autos   map[key]*automation
	runs    map[protocol.URI]key // every retained run, to its automation
	active  map[protocol.URI]*active
	closing bool
	claims  []claim // occurrences waiting for Options.Claim (guarded by mu)

	ctx    context.Context // ends at Close: the claims' context
	cancel context.CancelFunc
	wake   chan struct{}
	synced chan chan struct{} // for tests: a pass of the scheduler, acknowledged
	done   chan struct{}
	wg     sync.WaitGroup
}

// Open loads the automations kept in opts.Dir, settles what happened
// while ahpd was down (runs left in progress failed; schedule occurrences
// missed run once or are skipped, as each trigger's misfire policy says),
// and starts the scheduler. Close stops it.
func Open(opts Options) (*Engine, error) {
	e := &Engine{
		opts:   opts,
		clock:  opts.Clock,
		log:    opts.Logger,
		autos:  map[key]*automation{},
		runs:   map[protocol.URI]key{},
		active: map[protocol.URI]*active{},
		wake:   make(chan struct{}, 1),
		synced: make(chan chan struct{}),
		done:   make(chan struct{}),
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if e.clock == nil {
		e.clock = RealClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.opts.HistoryLimit <= 0 {
		e.opts.HistoryLimit = DefaultHistoryLimit
	}
	if e.opts.MaxActive <= 0 {
		e.opts.MaxActive = DefaultMaxActive
	}
	if e.opts.MaxPerOwner <= 0 {
		e.opts.MaxPerOwner = DefaultMaxPerOwner
	}
	if e.opts.WatchBudget <= 0 {
		e.opts.WatchBudget = DefaultWatchBudget
	}
	if e.opts.WatchShare <= 0 {
		e.opts.WatchShare = DefaultWatchShare
	}
	e.opts.WatchShare = min(e.opts.WatchShare, e.opts.WatchBudget)
	if opts.Dir != "" {
		e.store = &store{dir: opts.Dir}
	}
	recs, errs := e.store.load()
	for _, err := range errs {
		e.log.Error("automations: a kept automation could not be read", "err", err)
	}
	watch := opts.Watch
	if watch == nil {
		watch = NewFSWatcher(WatcherOptions{Log: e.log, Clock: e.clock, Debounce: opts.Debounce, Budget: e.opts.WatchBudget})
	}
	w, err := watch(WatchSink{Emit: e.Event, Problems: e.watchProblems})
	if err != nil {
		e.cancel()
		return nil, fmt.Errorf("automations: start the file watcher: %w", err)
	}
	e.watcher = w
	e.mu.Lock()
	now := e.clock.Now()
	for _, r := range recs {
		e.restoreLocked(r, now)
	}
	e.unlock()
	e.refreshWatches()
	e.wg.Add(1)
	go e.loop()
	return e, nil
}

// restoreLocked takes back a kept automation.
func (e *Engine) restoreLocked(r *record, now time.Time) {
	c, err := compile(r.Definition)
	if err != nil {
		// Kept, listed and runnable by hand, but its triggers do not fire
		// until it is fixed: the person sees it rather than losing it.
		e.log.Error("automations: a kept automation no longer checks; its triggers are off", "automation", r.Resource, "err", err)
		c = &compiled{def: r.Definition, schedules: map[string]*Schedule{}}
		c.def.Triggers = nil
	}
	a := &automation{rec: r, c: c}
	k := key{r.Owner, r.Resource}
	e.autos[k] = a
	changed := false
	for i := range r.Runs {
		rr := &r.Runs[i]
		e.runs[rr.State.Resource] = k
		if !terminal(rr.State.Lifecycle) {
			rr.State.Lifecycle = failedLifecycle(rr.State.Lifecycle, now, "ahpd stopped before the run ended")
			changed = true
		}
	}
	if r.LastFire == nil {
		r.LastFire = map[string]time.Time{}
	}
	for _, t := range r.Definition.Triggers {
		st, ok := t.(*protocol.AutomationScheduleTrigger)
		if !ok {
			continue
		}
		s := c.schedules[st.ID]
		last, ok := r.LastFire[st.ID]
		if s == nil || !ok || !r.Definition.Enabled {
			r.LastFire[st.ID] = now
			changed = true
			continue
		}
		due := s.Next(last)
		if due.IsZero() || due.After(now) || (!c.afterDate.IsZero() && !due.Before(c.afterDate)) {
			continue // nothing missed, or only after it was to stop
		}
		// Missed while ahpd was down.
		missed := s.Latest(last, now)
		r.LastFire[st.ID] = now
		changed = true
		if st.MisfirePolicy != nil && *st.MisfirePolicy == protocol.AutomationMisfirePolicySkip {
			e.log.Info("automations: skipped a schedule occurrence missed while ahpd was down", "automation", r.Resource, "trigger", st.ID, "missed", missed)
			continue
		}
		e.offerLocked(a, st.ID, missed, true)
	}
	if changed {
		e.saveLocked(a)
	}
}

// Close stops the scheduler and the watcher, cancels the runs in progress
// (they end failed: ahpd stopped) and waits for them.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closing {
		e.unlock()
		return nil
	}
	e.closing = true
	for _, ac := range e.active {
		ac.cancel()
	}
	e.unlock()
	e.cancel()
	close(e.done)
	e.wg.Wait()
	return e.watcher.Close()
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create makes an automation for owner at the client-chosen uri.
func (e *Engine) Create(owner string, uri protocol.URI, def protocol.AutomationDefinition) (protocol.AutomationEntry, error) {
	return e.create(owner, uri, def, false)
}

func (e *Engine) create(owner string, uri protocol.URI, def protocol.AutomationDefinition, fromConfig bool) (protocol.AutomationEntry, error) {
	if _, err := idOf(uri); err != nil {
		return protocol.AutomationEntry{}, err
	}
	c, err := compile(def)
	if err != nil {
		return protocol.AutomationEntry{}, err
	}
	if !fromConfig {
		if err := e.checkWatches(owner, uri, c.def); err != nil {
			return protocol.AutomationEntry{}, err
		}
	}
	e.mu.Lock()
	k := key{owner, uri}
	if e.closing {
		e.unlock()
		return protocol.AutomationEntry{}, fmt.Errorf("ahpd is shutting down")
	}
	if _, ok := e.autos[k]; ok {
		e.unlock()
		return protocol.AutomationEntry{}, invalid("an automation %s already exists; update it or choose another id", protocol.Quote(uri))
	}
	if !fromConfig && !IsHostOwner(owner) {
		if n := e.countLocked(owner); n >= e.opts.MaxPerOwner {
			e.unlock()
			return protocol.AutomationEntry{}, limited("%s has %d automations, the most one person may have on this host; remove one before making another", owner, n)
		}
	}
	now := e.clock.Now()
	r := &record{
		Version: recordVersion, Owner: owner, Resource: uri, Definition: c.def,
		CreatedAt: stamp(now), ModifiedAt: stamp(now), LastFire: map[string]time.Time{},
		FromConfig: fromConfig, Runs: []runRecord{},
	}
	for id := range c.schedules {
		r.LastFire[id] = now
	}
	a := &automation{rec: r, c: c}
	e.autos[k] = a
	if err := e.saveLocked(a); err != nil {
		delete(e.autos, k)
		e.unlock()
		return protocol.AutomationEntry{}, err
	}
	entry := e.emitEntryLocked(a)
	e.unlock()
	e.afterDefinitionChange()
	return entry, nil
}

// countLocked is how many automations owner has.
func (e *Engine) countLocked(owner string) int {
	n := 0
	for k := range e.autos {
		if k.owner == owner {
			n++
		}
	}
	return n
}

// IsHostOwner reports whether owner is the host itself, which the limits
// on one person (Options.MaxPerOwner, Options.WatchShare) do not bound:
// root (root:<host>, the connection token's principal and the config
// file's default owner), or nobody ("" as the host records it, or
// "nobody" as grants.Parse reads it: everyone on a host without a users
// directory, where there is only the one party to share with).
func IsHostOwner(owner string) bool {
	return owner == "" || owner == "nobody" || strings.HasPrefix(owner, "root:")
}

// Update applies a patch to owner's automation at uri.
func (e *Engine) Update(owner string, uri protocol.URI, p protocol.AutomationDefinitionPatch) (protocol.AutomationEntry, error) {
	// What it would watch is checked against the owner's share before
	// the lock, since that walks folders (a change made meanwhile is
	// caught by the watcher). One the config file declares is refused
	// below for that.
	if cur, err := e.Entry(owner, uri); err == nil && !IsHostOwner(owner) && slices.Contains(cur.Operations, protocol.AutomationOperationUpdate) {
		if c, err := compile(applyPatch(cur.Definition, p)); err == nil {
			if err := e.checkWatches(owner, uri, c.def); err != nil {
				return protocol.AutomationEntry{}, err
			}
		}
	}
	e.mu.Lock()
	a, ok := e.autos[key{owner, uri}]
	if !ok {
		e.unlock()
		return protocol.AutomationEntry{}, fmt.Errorf("%w: no automation %s", ErrNotFound, protocol.Quote(uri))
	}
	if a.rec.FromConfig {
		e.unlock()
		return protocol.AutomationEntry{}, invalid("automation %s is declared in ahpd's config file: change it there", protocol.Quote(uri))
	}
	entry, err := e.replaceLocked(a, applyPatch(a.rec.Definition, p))
	e.unlock()
	if err == nil {
		e.afterDefinitionChange()
	}
	return entry, err
}

// replaceLocked puts def in place of a's definition.
func (e *Engine) replaceLocked(a *automation, def protocol.AutomationDefinition) (protocol.AutomationEntry, error) {
	c, err := compile(def)
	if err != nil {
		return protocol.AutomationEntry{}, err
	}
	now := e.clock.Now()
	old := a.c
	wasEnabled := a.rec.Definition.Enabled
	if (!wasEnabled && c.def.Enabled) || (old.afterRuns == 0 && c.afterRuns > 0) {
		a.rec.RunCount = 0 // a fresh allowance
	}
	last := map[string]time.Time{}
	for _, t := range c.def.Triggers {
		st, ok := t.(*protocol.AutomationScheduleTrigger)
		if !ok {
			continue
		}
		prev, had := a.rec.LastFire[st.ID]
		same := slices.ContainsFunc(a.rec.Definition.Triggers, func(o protocol.AutomationTrigger) bool {
			os, ok := o.(*protocol.AutomationScheduleTrigger)
			return ok && os.ID == st.ID && os.Schedule.Expression == st.Schedule.Expression && os.Schedule.TimeZone == st.Schedule.TimeZone
		})
		if had && same && wasEnabled {
			last[st.ID] = prev
		} else {
			last[st.ID] = now // a new or changed schedule starts from now
			delete(a.passed, st.ID)
		}
	}
	a.rec.LastFire = last
	a.rec.Definition = c.def
	a.c = c
	a.rec.ModifiedAt = stamp(now)
	if err := e.saveLocked(a); err != nil {
		return protocol.AutomationEntry{}, err
	}
	return e.emitEntryLocked(a), nil
}

// Remove deletes owner's automation at uri and cancels its runs. An
// unknown one is not an error: removing is idempotent.
func (e *Engine) Remove(owner string, uri protocol.URI) error {
	e.mu.Lock()
	k := key{owner, uri}
	a, ok := e.autos[k]
	if !ok {
		e.unlock()
		return nil
	}
	if a.rec.FromConfig {
		e.unlock()
		return invalid("automation %s is declared in ahpd's config file: remove it there", protocol.Quote(uri))
	}
	err := e.removeLocked(k, a)
	e.unlock()
	e.afterDefinitionChange()
	return err
}

func (e *Engine) removeLocked(k key, a *automation) error {
	if err := e.store.remove(k.owner, k.uri); err != nil {
		return fmt.Errorf("remove automation %s: %w", k.uri, err)
	}
	delete(e.autos, k)
	for _, rr := range a.rec.Runs {
		delete(e.runs, rr.State.Resource)
		if ac := e.active[rr.State.Resource]; ac != nil {
			ac.cancelRequested = true
			ac.cancel()
		}
	}
	e.emitLocked(Change{Owner: k.owner, Removed: k.uri})
	return nil
}

// Declared is an automation the config file declares.
type Declared struct {
	Owner      string
	Resource   protocol.URI
	Definition protocol.AutomationDefinition
}

// SetDeclared makes the config file's automations what decl says: new
// ones created, changed ones updated, those no longer declared removed.
// People may run them but not change or remove them over the protocol.
func (e *Engine) SetDeclared(decl []Declared) error {
	want := map[key]Declared{}
	for _, d := range decl {
		k := key{d.Owner, d.Resource}
		if _, dup := want[k]; dup {
			return invalid("automation %s is declared twice", protocol.Quote(d.Resource))
		}
		c, err := compile(d.Definition)
		if err != nil {
			return fmt.Errorf("automation %s: %w", d.Resource, err)
		}
		d.Definition = c.def // normalized, to compare with what is kept
		want[k] = d
	}
	var errs []error
	for _, d := range want {
		e.mu.Lock()
		a, ok := e.autos[key{d.Owner, d.Resource}]
		if ok && !a.rec.FromConfig {
			e.unlock()
			errs = append(errs, invalid("automation %s is declared in the config file and was also made over the protocol; remove one", protocol.Quote(d.Resource)))
			continue
		}
		if ok {
			if !sameDefinition(a.rec.Definition, d.Definition) {
				if _, err := e.replaceLocked(a, d.Definition); err != nil {
					errs = append(errs, err)
				}
			}
			e.unlock()
			continue
		}
		e.unlock()
		if _, err := e.create(d.Owner, d.Resource, d.Definition, true); err != nil {
			errs = append(errs, err)
		}
	}
	e.mu.Lock()
	for k, a := range e.autos {
		if _, ok := want[k]; !ok && a.rec.FromConfig {
			if err := e.removeLocked(k, a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	e.unlock()
	e.afterDefinitionChange()
	if len(errs) > 0 {
		return fmt.Errorf("automations in the config file: %w", joinErrs(errs))
	}
	return nil
}

// Entries returns owner's automations, in the order of their resources.
func (e *Engine) Entries(owner string) []protocol.AutomationEntry {
	e.mu.Lock()
	defer e.unlock()
	return e.entriesLocked(owner)
}

func (e *Engine) entriesLocked(owner string) []protocol.AutomationEntry {
	var ks []key
	for k := range e.autos {
		if k.owner == owner {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b key) int { return strings.Compare(a.uri, b.uri) })
	out := make([]protocol.AutomationEntry, 0, len(ks))
	for _, k := range ks {
		out = append(out, e.entryLocked(e.autos[k]))
	}
	return out
}

// Entry returns owner's automation at uri.
func (e *Engine) Entry(owner string, uri protocol.URI) (protocol.AutomationEntry, error) {
	e.mu.Lock()
	defer e.unlock()
	a, ok := e.autos[key{owner, uri}]
	if !ok {
		return protocol.AutomationEntry{}, fmt.Errorf("%w: no automation %s", ErrNotFound, protocol.Quote(uri))
	}
	return e.entryLocked(a), nil
}

// FetchRuns republishes owner's automation at uri with every run it keeps
// (ahpd keeps no runs beyond what the entry shows, so there is no older
// page).
func (e *Engine) FetchRuns(owner string, uri protocol.URI) error {
	e.mu.Lock()
	defer e.unlock()
	a, ok := e.autos[key{owner, uri}]
	if !ok {
		return fmt.Errorf("%w: no automation %s", ErrNotFound, protocol.Quote(uri))
	}
	e.emitEntryLocked(a)
	return nil
}

// entryLocked is a's state as the protocol shows it.
func (e *Engine) entryLocked(a *automation) protocol.AutomationEntry {
	r := a.rec
	ops := []protocol.AutomationOperation{protocol.AutomationOperationUpdate, protocol.AutomationOperationRemove, protocol.AutomationOperationRun}
	if r.FromConfig {
		ops = []protocol.AutomationOperation{protocol.AutomationOperationRun}
	}
	entry := protocol.AutomationEntry{
		Resource: r.Resource, Definition: r.Definition, Runs: []protocol.AutomationRunSummary{},
		Operations: ops, CreatedAt: r.CreatedAt, ModifiedAt: r.ModifiedAt,
	}
	if a.c.afterRuns > 0 {
		n := r.RunCount
		entry.RunCount = &n
	}
	if next := e.nextRunLocked(a); !next.IsZero() {
		s := stamp(next)
		entry.NextRunAt = &s
	}
	for _, rr := range r.Runs {
		entry.Runs = append(entry.Runs, summary(rr.State))
	}
	if info, ok := a.watchErrorInfo(); ok {
		if b, err := json.Marshal(info); err == nil {
			entry.Meta = protocol.Object{watchErrorMeta: jsontext.Value(b)}
		}
	}
	return entry
}

// nextRunLocked is a's earliest schedule occurrence to come, or zero.
func (e *Engine) nextRunLocked(a *automation) time.Time {
	if !a.rec.Definition.Enabled {
		return time.Time{}
	}
	var next time.Time
	for id, s := range a.c.schedules {
		if t := s.Next(a.rec.LastFire[id]); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !a.c.afterDate.IsZero() && !next.Before(a.c.afterDate) {
		return time.Time{}
	}
	return next
}

func summary(s protocol.AutomationRunState) protocol.AutomationRunSummary {
	return protocol.AutomationRunSummary{
		Resource: s.Resource, Automation: s.Automation, Origin: s.Origin, Lifecycle: s.Lifecycle,
		PrimarySession: s.PrimarySession, SessionCount: int64(len(s.Sessions)),
	}
}

func (e *Engine) emitLocked(c Change) {
	if e.opts.OnChange != nil {
		e.told.queue = append(e.told.queue, func() { e.opts.OnChange(c) })
	}
}

func (e *Engine) emitEntryLocked(a *automation) protocol.AutomationEntry {
	entry := e.entryLocked(a)
	e.emitLocked(Change{Owner: a.rec.Owner, Entry: &entry})
	return entry
}

// saveLocked keeps a; a failure is logged and returned, the state in
// memory stands.
func (e *Engine) saveLocked(a *automation) error {
	if err := e.store.save(a.rec); err != nil {
		e.log.Error("automations: could not keep an automation", "automation", a.rec.Resource, "err", err)
		return fmt.Errorf("keep automation %s: %w", a.rec.Resource, err)
	}
	return nil
}

// afterDefinitionChange wakes the scheduler and refreshes the watches.
func (e *Engine) afterDefinitionChange() {
	e.poke()
	e.refreshWatches()
}

// refreshWatches tells the watcher what the enabled event triggers watch,
// the oldest automations first: the watcher serves them in that order,
// so an automation made later never takes folders from one before it.
func (e *Engine) refreshWatches() {
	e.setMu.Lock()
	defer e.setMu.Unlock()
	e.mu.Lock()
	var ws []Watch
	ks := e.sortedKeysLocked()
	slices.SortStableFunc(ks, func(x, y key) int { return strings.Compare(e.autos[x].rec.CreatedAt, e.autos[y].rec.CreatedAt) })
	for _, k := range ks {
		if a := e.autos[k]; a.rec.Definition.Enabled {
			ws = append(ws, e.watchesOf(k.owner, k.uri, a.c.def)...)
		}
	}
	e.unlock()
	e.watcher.Set(ws)
}

// watchesOf is what def's event triggers watch, for owner's automation uri.
func (e *Engine) watchesOf(owner string, uri protocol.URI, def protocol.AutomationDefinition) []Watch {
	share := e.opts.WatchShare
	if IsHostOwner(owner) {
		share = 0
	}
	var ws []Watch
	for _, t := range def.Triggers {
		et, ok := t.(*protocol.AutomationEventTrigger)
		if !ok {
			continue
		}
		w := Watch{Owner: owner, Automation: uri, Trigger: et.ID, Type: et.Type, Share: share}
		switch et.Type {
		case TriggerFiles:
			w.Path = configOf(et)["folder"]
		case TriggerGitRef:
			w.Path = configOf(et)["repository"]
		}
		if w.Path != "" {
			ws = append(ws, w)
		}
	}
	return ws
}

// checkWatches refuses def when what one of its triggers watches would
// take owner past their share. It walks folders (Share+1 at most a
// trigger), so it is called holding none of the engine's locks.
func (e *Engine) checkWatches(owner string, uri protocol.URI, def protocol.AutomationDefinition) error {
	if IsHostOwner(owner) {
		return nil
	}
	for _, w := range e.watchesOf(owner, uri, def) {
		if err := e.watcher.Check(w); err != nil {
			return limited("trigger %s: %v", protocol.Quote(w.Trigger), err)
		}
	}
	return nil
}

// watchErrorMeta is the _meta key, on an automation's entry, that says
// one of its triggers' watches does not work (or missed changes): an
// ErrorInfo whose message names each such trigger and why.
const watchErrorMeta = "ahpd.watchError"

// watchProblems takes what the watcher says does not work
// (WatchSink.Problems): each automation whose problems changed is told
// again, and each new problem logged once.
func (e *Engine) watchProblems(ps []WatchProblem) {
	e.mu.Lock()
	defer e.unlock()
	if e.closing {
		return
	}
	next := map[key]map[string]WatchProblem{}
	for _, p := range ps {
		k := key{p.Owner, p.Automation}
		if next[k] == nil {
			next[k] = map[string]WatchProblem{}
		}
		if _, ok := next[k][p.Trigger]; !ok {
			next[k][p.Trigger] = p
		}
	}
	for _, k := range e.sortedKeysLocked() {
		a := e.autos[k]
		now := next[k]
		same := len(now) == len(a.watch)
		for id, p := range now {
			was, had := a.watch[id]
			if had && was.Missed == p.Missed && was.Err.Error() == p.Err.Error() {
				continue
			}
			same = false
			if !p.Missed { // a miss the watcher logged, once for all
				e.log.Warn("automations: a trigger's watch does not work; it fires for nothing", "automation", k.uri, "owner", k.owner, "trigger", id, "err", p.Err)
			}
		}
		for id, was := range a.watch {
			if _, ok := now[id]; !ok {
				same = false
				if !was.Missed {
					e.log.Info("automations: a trigger's watch works again", "automation", k.uri, "owner", k.owner, "trigger", id)
				}
			}
		}
		if !same {
			a.watch = now
			e.emitEntryLocked(a)
		}
	}
}

// watchBroken reports whether trigger id of a watches nothing now.
func (a *automation) watchBroken(id string) bool {
	p, ok := a.watch[id]
	return ok && !p.Missed
}

// watchErrorInfo is the entry's watchErrorMeta: its triggers' problems,
// in the order of its triggers, the first naming the error's type; not
// ok when none has one. (A problem of a trigger its definition no
// longer has is shown no more: the watcher's next word is on its way.)
func (a *automation) watchErrorInfo() (protocol.ErrorInfo, bool) {
	var info protocol.ErrorInfo
	var msgs []string
	for _, t := range a.c.def.Triggers {
		et, ok := t.(*protocol.AutomationEventTrigger)
		if !ok {
			continue
		}
		p, ok := a.watch[et.ID]
		if !ok {
			continue
		}
		if info.ErrorType == "" {
			info.ErrorType = watchErrorType(p)
		}
		msgs = append(msgs, fmt.Sprintf("trigger %s: %v", protocol.Quote(et.ID), p.Err))
	}
	info.Message = strings.Join(msgs, "; ")
	return info, len(msgs) > 0
}

func watchErrorType(p WatchProblem) string {
	switch {
	case p.Missed:
		return "watchMissedChanges"
	case errors.Is(p.Err, ErrWatchShare):
		return "watchShareExceeded"
	case errors.Is(p.Err, ErrWatchBudget):
		return "watchBudgetSpent"
	case errors.Is(p.Err, ErrWatchGone):
		return "watchGone"
	}
	return "watchFailed"
}

func sameDefinition(a, b protocol.AutomationDefinition) bool {
	ja, err1 := a.MarshalJSON()
	jb, err2 := b.MarshalJSON()
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func joinErrs(errs []error) error {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// Snapshot calls fn with owner's automations, in its place among the
// changes OnChange reports: after every change fn sees and before any it
// does not, so a host can subscribe a client in fn and miss nothing. fn
// is called before Snapshot returns, holding none of the engine's locks.
func (e *Engine) Snapshot(owner string, fn func([]protocol.AutomationEntry)) {
	e.mu.Lock()
	entries := e.entriesLocked(owner)
	e.told.queue = append(e.told.queue, func() { fn(entries) })
	e.unlock()
}

// RunSnapshot calls fn with owner's run as Snapshot does; it reports
// ErrNotFound for a run owner does not have.
func (e *Engine) RunSnapshot(owner string, run protocol.URI, fn func(protocol.AutomationRunState)) error {
	e.mu.Lock()
	rr := e.runLocked(owner, run)
	if rr == nil {
		e.unlock()
		return fmt.Errorf("%w: no automation run %s", ErrNotFound, protocol.Quote(run))
	}
	state := rr.State
	e.told.queue = append(e.told.queue, func() { fn(state) })
	e.unlock()
	return nil
}
