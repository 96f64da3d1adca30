package conn

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// writeTimeout bounds one write: a client that stopped reading is cut.
const writeTimeout = 30 * time.Second

// Conn is one client connection. Its state after initialize (clientId,
// version) is set once by the initialize handler and read after.
//
// A connection ends one of two ways. Finished (the client closed, or ahpd
// shuts down): no more requests are taken, those taken are answered, the
// queue is written and the transport closes with 1000. Aborted (a rule
// broken, a deadline passed, the client too far behind): work under way is
// cancelled, the queue dropped, and the transport closes with the code
// that says why. Either way it is done, and the host forgets it, only once
// its goroutines have ended.
type Conn struct {
	id       int64
	t        Transport
	log      *slog.Logger
	stdio    bool // the host's own connection: no deadlines
	limits   Limits
	clock    clock.Clock
	attached func(channel string) bool
	onCut    func(reason string)
	onClosed func(*Conn)
	// principal is who the connection acts for, fixed at the handshake.
	principal grants.Principal
	// numbering names the numbering of the client's actions the
	// connection sends (package retries), set as it initializes or
	// reconnects.
	numbering atomic.Uint64
	// forwardedFrom is the host whose connection this one stands for; ""
	// for a connection of its own.
	forwardedFrom string
	cred          grants.Credential // what it presented, rechecked as users change
	ctx           context.Context
	cancel        context.CancelFunc
	started       time.Time

	writing atomic.Int64 // when the write under way began (unix ns), or 0
	heard   atomic.Int64 // when the client was last heard from (unix ns)
	pinging atomic.Bool  // a WebSocket ping is out
	delays  atomic.Bool  // delay is not empty: frames are stamped with the time (delivery.go)
	hello   atomic.Pointer[hello]
	line    line    // the order its requests are taken in (line.go)
	in      inbound // what reads the client's messages (inbound.go)

	mu        lockcheck.Mutex
	ready     bool // initialize has answered
	queue     []*fanout.Frame
	spare     []*fanout.Frame   // the writer's last batch, reused so queueing does not allocate
	queued    int               // bytes in queue
	largest   int               // the largest frame in queue, in bytes
	held      []*fanout.Frame   // frames held until the pending snapshots are out
	asked     map[string]bool   // the ids of requests taken and not yet answered
	holds     map[string]bool   // requests whose responses carry snapshots
	closing   map[string]string // requests whose responses end the connection, with why
	encoded   encodedResults    // results sent as they were encoded (encoded.go)
	subs      map[string]bool   // the channels this connection watches
	sessions  int               // how many of subs count against Limits.AttachedSessions
	readOnly  map[string]bool   // those it subscribed to read-only (readonly.go)
	closed    bool
	closeWhy  string
	closeCode CloseCode
	finishing string // set once the connection is to end when its queue is written
	wake      chan struct{}
	writerEnd chan struct{}
	serveEnd  chan struct{} // closed when its JSON-RPC server has stopped (serve.go)
	served    bool          // serve began: done waits for it
	done      chan struct{} // closed when nothing of the connection runs

	// forwardedTo are the hosts it forwarded requests to, told when it
	// ends.
	forwardedTo map[string]bool

	// Under mu: how long each channel's text may be held, and what is
	// (delivery.go).
	delay    map[string]time.Duration
	coalesce fanout.Coalescer
}

// Config is what a connection is made of. Transport is required; a nil
// func does nothing, a nil Clock is the real one, and zero Limits take
// their defaults.
type Config struct {
	ID        int64
	Transport Transport
	// Stdio marks the host's own connection: it has no deadlines.
	Stdio     bool
	Principal grants.Principal
	// Credential is what it presented, kept for rechecks.
	Credential grants.Credential
	// ForwardedFrom is the host whose connection this one stands for, or
	// "".
	ForwardedFrom string
	Limits        Limits
	Clock         clock.Clock
	Log           *slog.Logger
	// Attached reports whether a channel counts against
	// Limits.AttachedSessions; nil counts none.
	Attached func(channel string) bool
	// OnCut is told each time the connection is cut, with one of the
	// Cut reasons, to count it.
	OnCut func(reason string)
	// OnClosed is called once nothing of the connection runs but the
	// call itself; Done closes after it returns.
	OnClosed func(*Conn)
}

// New makes a connection of cfg under ctx and starts its writer. It reads
// nothing until Serve.
func New(ctx context.Context, cfg Config) *Conn {
	ctx, cancel := context.WithCancel(ctx)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := clk.Now()
	c := &Conn{
		mu:   lockcheck.Mutex{Class: "conn"},
		line: line{mu: lockcheck.Mutex{Class: "line"}},
		id:   cfg.ID, t: cfg.Transport, stdio: cfg.Stdio, principal: cfg.Principal, cred: cfg.Credential,
		forwardedFrom: cfg.ForwardedFrom, ctx: ctx, cancel: cancel,
		limits:    cfg.Limits.WithDefaults(),
		clock:     clk,
		attached:  cfg.Attached,
		onCut:     cfg.OnCut,
		onClosed:  cfg.OnClosed,
		started:   now,
		log:       log.With("conn", cfg.ID, "principal", cfg.Principal.String()),
		holds:     map[string]bool{},
		asked:     map[string]bool{},
		subs:      map[string]bool{},
		wake:      make(chan struct{}, 1),
		writerEnd: make(chan struct{}),
		serveEnd:  make(chan struct{}),
		done:      make(chan struct{}),
	}
	c.heard.Store(now.UnixNano())
	c.in.init()
	go c.writer()
	return c
}

// ID is the connection's number, unique in its host.
func (c *Conn) ID() int64 { return c.id }

// Principal is who the connection acts for.
func (c *Conn) Principal() grants.Principal { return c.principal }

// Credential is what the connection presented.
func (c *Conn) Credential() grants.Credential { return c.cred }

// ForwardedFrom is the host whose connection this one stands for, or "".
func (c *Conn) ForwardedFrom() string { return c.forwardedFrom }

// Log is the connection's logger.
func (c *Conn) Log() *slog.Logger { return c.log }

// Context ends when the connection starts to end.
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed when nothing of the connection runs.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Stopped is closed once the connection writes no more: it was cut, or
// is ending. It may take longer to be done, while its peer does not
// answer the close.
func (c *Conn) Stopped() <-chan struct{} { return c.writerEnd }

// Limits are the connection's, defaults filled.
func (c *Conn) Limits() Limits { return c.limits }

func (c *Conn) now() time.Time { return c.clock.Now() }

// cutFor counts a cut.
func (c *Conn) cutFor(reason string) {
	if c.onCut != nil {
		c.onCut(reason)
	}
}

// countsAttached reports whether channel counts against
// Limits.AttachedSessions.
func (c *Conn) countsAttached(channel string) bool {
	return c.attached != nil && c.attached(channel)
}

// Stats are a connection's figures, for the host's gauges.
type Stats struct {
	Subscriptions  int
	QueuedMessages int
	QueuedBytes    int
}

// Stats reads the connection's figures.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{len(c.subs), len(c.queue), c.queued}
}

// Ended reports whether the connection has ended (or begun to), with the
// code and the reason it closes with.
func (c *Conn) Ended() (code CloseCode, why string, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode, c.closeWhy, c.closed
}

// Send queues a frame of a channel the connection watches. While a
// response carrying a snapshot is on its way, frames wait behind it: a
// client must have the snapshot before the changes that follow it, and
// sees serverSeq only rise.
func (c *Conn) Send(f *fanout.Frame) {
	now := c.heldAt()
	c.mu.Lock()
	defer c.mu.Unlock()
	version := c.Negotiated()
	if !knownTo(f.Action(), version) || (f.Method() != "" && version != "" && !protocol.NotificationKnownTo(f.Method(), version)) {
		return
	}
	if len(c.holds) > 0 {
		c.held = append(c.held, f)
		return
	}
	c.enqueueLocked(f, now)
}

// Wants reports whether an action of type t goes to this connection: its
// protocol version knows t.
func (c *Conn) Wants(t protocol.ActionType) bool { return knownTo(t, c.Negotiated()) }

// knownTo reports whether a connection speaking version knows action type
// t; "" is an echo or a response, which every version knows.
func knownTo(t protocol.ActionType, version string) bool {
	return version == "" || t == "" || t.KnownTo(version)
}

// respond queues a response, then the frames held for it. The ids it
// answers are free for the client to use again.
func (c *Conn) respond(data []byte) {
	ids := replyIDs(data)
	now := c.heldAt()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enqueueLocked(fanout.Raw(data), now)
	for _, id := range ids {
		delete(c.asked, id)
	}
	if len(c.holds) == 0 && len(c.closing) == 0 {
		return
	}
	for _, id := range ids {
		delete(c.holds, id)
		if why, ok := c.closing[id]; ok {
			c.finishLocked(why)
		}
	}
	c.releaseLocked(now)
}

// CloseAfter ends the connection once the response to requestID is out.
func (c *Conn) CloseAfter(requestID, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing == nil {
		c.closing = map[string]string{}
	}
	c.closing[requestID] = why
}

// Hold records a subscription to channel, made for the request requestID:
// frames wait until that request's response is out (fanout.Subscriber).
func (c *Conn) Hold(channel, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.subs[channel] && c.countsAttached(channel) {
		c.sessions++
	}
	c.subs[channel] = true
	if requestID != "" {
		c.holds[requestID] = true
	}
}

// Release stops holding for a request that failed.
func (c *Conn) Release(requestID string) {
	now := c.heldAt()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds, requestID)
	c.releaseLocked(now)
}

func (c *Conn) releaseLocked(now time.Time) {
	if len(c.holds) > 0 {
		return
	}
	for _, f := range c.held {
		if f.Channel() == "" || c.subs[f.Channel()] {
			c.enqueueLocked(f, now)
		}
	}
	c.held = nil
}

// RoomToWatch refuses a subscription past Limits.Subscriptions, or a
// session's past Limits.AttachedSessions. A
// connection's requests are taken one at a time, so none comes between
// this and the subscription.
func (c *Conn) RoomToWatch(channel string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[channel] {
		return nil
	}
	if len(c.subs) >= c.limits.Subscriptions {
		return protocol.Errorf(protocol.CodeInvalidRequest, "this connection watches %d channels, the most it may: unsubscribe from one first", len(c.subs))
	}
	if c.sessions >= c.limits.AttachedSessions && c.countsAttached(channel) {
		return TooManyAttached(c.sessions)
	}
	return nil
}

func (c *Conn) Forget(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[channel] && c.countsAttached(channel) {
		c.sessions--
	}
	delete(c.subs, channel)
	delete(c.readOnly, channel)
	c.undelayLocked(channel)
}

func (c *Conn) Subscriptions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.subs))
	for ch := range c.subs {
		out = append(out, ch)
	}
	return out
}

// enqueueLocked queues a frame, or holds it back a while when its
// subscription allows (delivery.go); now is when it came, or zero.
func (c *Conn) enqueueLocked(f *fanout.Frame, now time.Time) {
	if c.closed || c.finishing != "" {
		return
	}
	if len(c.delay) > 0 && !c.coalesceLocked(f, now) {
		return
	}
	c.queueLocked(f)
}

// queueLocked adds a frame to the queue: merged into the last one when the
// client is behind, or cutting the client when it is too far behind.
func (c *Conn) queueLocked(f *fanout.Frame) {
	if c.mergeLocked(f) {
		return
	}
	// The largest frame queued does not count against the bytes: a long
	// prompt, larger than the limit alone, is no reason to cut a client
	// that is keeping up.
	largest := max(c.largest, f.Len())
	if len(c.queue) >= c.limits.QueuedMessages || c.queued+f.Len()-largest > c.limits.QueuedBytes {
		// The client is too far behind to catch up live. Cut it; it will
		// reconnect and be replayed what it missed, or sent snapshots.
		// The close reason starts with the word a reconnect past the
		// journal's retention is told (attach.go).
		why := fmt.Sprintf("%s: client too slow, %d messages (%d bytes) were waiting to be sent; reconnect to catch up", TooFarBehind, len(c.queue), c.queued)
		c.log.Warn("cut a client that fell behind", "client", c.Client(), "queued", len(c.queue), "bytes", c.queued)
		c.cutFor(CutSlow)
		c.queue, c.queued, c.largest = nil, 0, 0
		c.abortLocked(ClosePolicy, why)
		return
	}
	c.queue = append(c.queue, f)
	c.queued += f.Len()
	c.largest = largest
	c.wakeLocked()
}

// FellBehind cuts the connection, as queueLocked does a client too slow:
// the bus held back more frames for it than it keeps, behind a write of
// one of its sessions' journals that did not end while others went on
// (fanout's lanes). Its client reconnects and is replayed, or sent
// snapshots.
func (c *Conn) FellBehind(frames int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.finishing != "" {
		return
	}
	why := fmt.Sprintf("%s: %d changes waited for a session's journal to take an earlier one; reconnect to catch up", TooFarBehind, frames)
	c.log.Warn("cut a client whose changes waited too long for the journal", "client", c.Client(), "held", frames)
	c.cutFor(CutSlow)
	c.queue, c.queued, c.largest = nil, 0, 0
	c.abortLocked(ClosePolicy, why)
}

// wakeLocked tells the writer there is something to write, or a held frame
// to set its timer for.
func (c *Conn) wakeLocked() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// mergeLocked adds the text of a streamed text frame to the one at the end
// of the queue, when that is of the same part and not yet written: a
// client that is behind gets a reply in fewer, longer deltas rather than
// falling further behind, and its state is the same. A merged frame is
// this connection's own (frames are shared), encoded when written.
func (c *Conn) mergeLocked(f *fanout.Frame) bool {
	if len(c.queue) == 0 {
		return false
	}
	i := len(c.queue) - 1
	n, ok := fanout.Mergeable(c.queue[i], f)
	if !ok || c.queued+n-c.largest > c.limits.QueuedBytes {
		return false
	}
	c.queue[i] = fanout.Merge(c.queue[i], f)
	c.queued += n
	c.largest = max(c.largest, c.queue[i].Len())
	return true
}

// writer sends queued frames in order until the connection ends.
func (c *Conn) writer() {
	defer close(c.writerEnd)
	var timer heldTimer // when the text held is due (delivery.go)
	defer timer.stop()
	for {
		select {
		case <-c.wake:
		case <-timer.c:
			timer.fired()
			c.sendDue()
		case <-c.ctx.Done():
			return // aborted: what is queued is dropped
		}
		if err := c.writeQueued(); err != nil {
			if c.ctx.Err() == nil {
				c.cutFor(CutWrite)
				c.Abort(CloseInternal, "write failed: "+err.Error())
			}
			return
		}
		c.mu.Lock()
		why, done := c.finishing, c.finishing != "" && len(c.queue) == 0
		due := c.coalesce.Deadline()
		c.mu.Unlock()
		if done {
			c.end(CloseNormal, why)
			return
		}
		timer.set(c.clock, due)
	}
}

// Finish ends the connection once what is queued has been written, so that
// the last answers reach the client; nothing more is queued.
func (c *Conn) Finish(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishLocked(why)
}

func (c *Conn) finishLocked(why string) {
	if c.closed || c.finishing != "" {
		return
	}
	if f := c.coalesce.Flush(); f != nil {
		c.queueLocked(f) // what was held is written before the end
	}
	c.finishing = why
	c.wakeLocked()
}

// writeQueued writes what is queued. Two buffers take turns: the writer owns one
// batch while senders fill the other, so queueing allocates nothing once
// both have grown.
func (c *Conn) writeQueued() error {
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue, c.spare, c.queued, c.largest = c.spare[:0], nil, 0, 0
		c.mu.Unlock()
		for _, f := range batch {
			data := f.Bytes()
			// The host's watchdog ends a write that takes longer than
			// writeTimeout; a context per write would cost allocations on
			// the path every subscriber of every delta takes. The write is
			// stamped by the clock the watchdog reads (Config.Clock): by
			// the wall clock, a test's fake clock set years ahead found
			// every write under way at a tick stalled.
			c.writing.Store(c.now().UnixNano())
			err := c.t.Write(c.ctx, data)
			c.writing.Store(0)
			if err != nil {
				return err
			}
		}
		clear(batch) // let the frames go
		c.mu.Lock()
		c.spare = batch[:0]
		empty := len(c.queue) == 0
		c.mu.Unlock()
		if empty {
			return nil
		}
	}
}

// stuck reports whether a write has been under way longer than d.
func (c *Conn) stuck(now time.Time, d time.Duration) bool {
	start := c.writing.Load()
	return start != 0 && now.Sub(time.Unix(0, start)) > d
}

// Abort ends the connection now: work under way is cancelled and what is
// queued dropped.
func (c *Conn) Abort(code CloseCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abortLocked(code, reason)
}

func (c *Conn) abortLocked(code CloseCode, reason string) {
	if c.closed {
		return
	}
	c.queue, c.queued, c.largest, c.held = nil, 0, 0, nil
	c.coalesce.Flush()
	c.endLocked(code, reason)
}

// end closes the connection with code once its queue is written or
// dropped.
func (c *Conn) end(code CloseCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(code, reason)
}

func (c *Conn) endLocked(code CloseCode, reason string) {
	if c.closed {
		return
	}
	c.closed, c.closeWhy, c.closeCode = true, reason, code
	c.cancel()
	served := c.served
	go c.wind(served, code, reason)
}

// wind closes the transport once the writer has stopped and, when the
// connection was served, once its server and reader have too; then the
// host forgets the connection and it is done.
func (c *Conn) wind(served bool, code CloseCode, reason string) {
	<-c.writerEnd
	_ = c.t.Close(code, reason)
	if served {
		<-c.serveEnd
		if !c.stdio {
			// Nothing interrupts a read of stdin; the process ends anyway.
			<-c.in.readerEnd
		}
	}
	if c.onClosed != nil {
		c.onClosed(c)
	}
	close(c.done)
}
