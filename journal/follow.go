package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// FollowBuffer is how many entries a Follower holds for a reader that has
// not taken them yet; a reader that falls that far behind ends it with
// ErrFellBehind.
const FollowBuffer = 4096

// ErrFellBehind ends a Follower whose reader left FollowBuffer entries
// untaken. Every entry it delivered is still right: the reader reads on
// with Read from the last Seq it took, then follows again from there.
var ErrFellBehind = errors.New("journal: follower fell behind its reader")

// Bounds on how a follower waits for the server, when it must make its
// consumer again.
const (
	followRetryFirst = 100 * time.Millisecond
	followRetryMax   = 5 * time.Second
	// followCreate bounds the making of a consumer: an answer lost
	// (the server stopped as it was asked) is asked again soon.
	followCreate = 3 * time.Second
	// followRequest bounds a follower's other requests to the server.
	followRequest = 10 * time.Second
)

// A Follower delivers one session's entries as they are appended, by any
// host, in sequence order, each once. Make one with Journal.Follow.
//
// It reads through a consumer in the server's memory that delivers the
// session's entries from a stream sequence on, and checks that the
// consumer's own count of deliveries never skips. When it does, or the
// connection drops, or the server loses the consumer (a restart, missed
// heartbeats), the follower makes a new consumer from one past the last
// entry it delivered, as the client's ordered consumers do, so it
// survives what they survive with no gap and no duplicate. (Those are not
// used: in nats.go 1.55 one stopped while it waits to make its consumer
// again can panic, and nothing here may take the daemon down.)
type Follower struct {
	j       *Journal
	subject string
	session string
	entries chan Entry
	stop    chan struct{} // closed by Close
	once    sync.Once
	done    chan struct{} // closed once it has ended and cleaned up
	reset   chan struct{} // asks the loop for a new consumer (buffered 1)
	fail    chan struct{} // closed when a delivery ends it (err set)

	mu     sync.Mutex // guards the rest, and sends on entries
	gen    int        // the current consumer's number; older ones are ignored
	dseq   uint64     // the current consumer's last delivery count
	last   uint64     // the sequence of the last entry delivered (or after)
	from   uint64     // the sequence the current consumer started from
	rewind uint64     // when set, where the next consumer starts (an entry's first chunk)
	asm    *assembler // the chunks of the entry being delivered
	ended  bool       // entries is closed
	err    error      // why it ended
	sub    jetstream.ConsumeContext
	name   string // the current consumer's name on the server
}

// Follow delivers the session's entries with a sequence greater than
// after, oldest first, and then each one appended to the session until
// the follower ends: a host showing a session another host runs rebuilds
// its state with Read up to some entry, then follows from that entry's
// Seq. The session may hold no entries yet; the follower waits for them.
//
// Entries come on Entries, with their Seq, Time and Data as Read gives
// them, in order, with no gap and no duplicate, across reconnects; an
// entry written as chunks comes whole, once its last chunk is stored (a
// follower started inside one goes back for its first chunks). When
// retention has dropped entries after after, the follower starts at the
// first one kept, as Read does; a caller that must know compares after+1
// with KeptFrom first.
//
// It ends when Close is called, ctx ends or the journal closes (Err says
// nil, nil and ErrClosed), or when its reader leaves FollowBuffer entries
// untaken: it never holds up the NATS client for a slow reader, and ends
// with ErrFellBehind instead. Either way Entries is closed after the last
// entry delivered. The caller must call Close (after ctx ends too) to
// free what it holds.
func (j *Journal) Follow(ctx context.Context, session string, after uint64) (*Follower, error) {
	return j.follow(ctx, session, after, FollowBuffer)
}

// follow is Follow with the size of the reader's buffer.
func (j *Journal) follow(ctx context.Context, session string, after uint64, buffer int) (*Follower, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if after == math.MaxUint64 {
		return nil, errors.New("journal: following from past the greatest sequence")
	}
	f := &Follower{
		j:       j,
		subject: j.subject(session),
		session: session,
		entries: make(chan Entry, buffer),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		reset:   make(chan struct{}, 1),
		fail:    make(chan struct{}),
		last:    after,
		asm:     newAssembler(j.maxEntry),
	}
	// Registered with the journal's background work, so that Close stops
	// the follower and waits for it while the connection is still up.
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, ErrClosed
	}
	j.bg.Add(1)
	j.mu.Unlock()
	// Listening before the first consumer is made, so that a connection
	// that drops meanwhile is seen to.
	status := j.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING)
	if err := f.start(ctx); err != nil {
		j.nc.RemoveStatusListener(status)
		j.bg.Done()
		return nil, err
	}
	go f.run(ctx, status)
	return f, nil
}

// Entries delivers the session's entries. It is closed when the follower
// ends, after the last entry it delivered.
func (f *Follower) Entries() <-chan Entry { return f.entries }

// Err says why the follower ended: nil while it runs and when it was
// closed or its context ended, ErrClosed when the journal closed,
// ErrFellBehind when its reader fell behind, or what went wrong.
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Close stops the follower, closes Entries and waits until the follower
// has let go of its consumer. It is safe to call more than once, and
// after the follower ended by itself.
func (f *Follower) Close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// start makes a consumer of the session's entries (and their chunks)
// from one past the last delivered, or from the first chunk of the entry
// that follows it when it began at or before it, and starts taking them.
func (f *Follower) start(ctx context.Context) error {
	f.mu.Lock()
	f.gen++
	gen, from := f.gen, f.last+1
	if f.rewind != 0 {
		from = min(from, f.rewind)
	}
	f.from, f.dseq = from, 0
	f.asm = newAssembler(f.j.maxEntry)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, followCreate)
	defer cancel()
	cons, err := f.j.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
		FilterSubjects: []string{f.subject, f.subject + partSuffix},
		AckPolicy:      jetstream.AckNonePolicy,
		MemoryStorage:  true,
		Replicas:       1,
		// A host that dies leaves its consumer; the server drops it.
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("journal: following a session: %w", err)
	}
	name := cons.CachedInfo().Name
	sub, err := cons.Consume(
		func(m jetstream.Msg) { f.deliver(gen, m) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { f.consumeErr(gen, err) }),
		// The client's default buffer, but never more bytes at once than a
		// read fetches: chunks are up to a megabyte each.
		jetstream.PullMaxMessagesWithBytesLimit(500, f.j.fetchBytes()))
	if err != nil {
		f.drop(name)
		return fmt.Errorf("journal: following a session: %w", err)
	}
	f.mu.Lock()
	f.sub, f.name = sub, name
	f.mu.Unlock()
	return nil
}

// deliver hands one message of consumer gen to the reader. It runs on the
// NATS client's goroutine and never blocks.
func (f *Follower) deliver(gen int, m jetstream.Msg) {
	meta, err := m.Metadata()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended || gen != f.gen {
		return
	}
	if err != nil || meta.Sequence.Consumer != f.dseq+1 {
		// A delivery was missed (or cannot be placed): start again from
		// the last one delivered, ignoring this consumer meanwhile.
		f.gen++
		f.askReset()
		return
	}
	f.dseq = meta.Sequence.Consumer
	whole := m.Subject() == f.subject
	if whole && meta.Sequence.Stream <= f.last {
		// Delivered already; chunks taken before it were its own.
		f.asm.drop(f.subject)
		return
	}
	data, missing, err := f.asm.add(m.Subject(), meta.Sequence.Stream, m.Headers(), m.Data())
	switch {
	case err != nil:
		f.endLocked(fmt.Errorf("journal: following a session: %w", err))
		close(f.fail)
		return
	case missing != nil && missing.first < f.from:
		// The follower began inside this entry: start again from its
		// first chunk, ignoring this consumer meanwhile.
		f.rewind = missing.first
		f.gen++
		f.askReset()
		return
	case missing != nil:
		f.j.log.Debug("journal: following a session: skipping an entry that is not whole", "seq", meta.Sequence.Stream)
		f.rewind = 0
		return
	case data == nil:
		return // a chunk taken in
	}
	select {
	case f.entries <- Entry{Session: f.session, Seq: meta.Sequence.Stream, Time: meta.Timestamp, Data: data}:
		f.last, f.rewind = meta.Sequence.Stream, 0
	default:
		f.endLocked(ErrFellBehind)
		close(f.fail)
	}
}

// consumeErr handles what the client reports of consumer gen: the
// consumer gone, heartbeats missed, the server not answering for it, the
// connection closed.
func (f *Follower) consumeErr(gen int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended || gen != f.gen {
		return
	}
	switch {
	case errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrConsumerDeleted),
		errors.Is(err, jetstream.ErrConsumerNotFound),
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
		errors.Is(err, jetstream.ErrServerShutdown),
		errors.Is(err, jetstream.ErrBadRequest),
		errors.Is(err, nats.ErrNoResponders):
		f.gen++
		f.askReset()
	case errors.Is(err, jetstream.ErrConnectionClosed):
		// Not by the journal's Close, which ends its followers first.
		f.endLocked(fmt.Errorf("journal: following a session: %w", err))
		close(f.fail)
	default:
		f.j.log.Debug("journal: following a session", "err", err)
	}
}

// askReset asks the loop for a new consumer, once however often asked.
func (f *Follower) askReset() {
	select {
	case f.reset <- struct{}{}:
	default:
	}
}

// run waits for the follower's end, making a new consumer whenever the
// current one cannot be trusted, then lets go of everything.
//
// A connection that drops and comes back (status) may come back to a
// server that lost the consumer, or that forgot the pull: a new consumer
// then.
func (f *Follower) run(ctx context.Context, status chan nats.Status) {
	defer f.j.bg.Done()
	defer close(f.done)
	defer f.j.nc.RemoveStatusListener(status)
	var drops sync.WaitGroup
	defer drops.Wait()
	restarted := f.j.restarted()
	for ended := false; !ended; {
		select {
		case <-restarted:
			// The embedded server's JetStream started again: the
			// consumer is gone.
			restarted = f.j.restarted()
			f.restart(ctx, status, &drops)
		case <-f.stop:
			f.end(nil)
			ended = true
		case <-ctx.Done():
			f.end(nil)
			ended = true
		case <-f.j.bgCtx.Done():
			f.end(ErrClosed)
			ended = true
		case <-f.fail:
			ended = true
		case <-status:
			f.restart(ctx, status, &drops)
		case <-f.reset:
			f.restart(ctx, status, &drops)
		}
	}
	f.mu.Lock()
	sub, name := f.sub, f.name
	f.sub, f.name = nil, ""
	f.mu.Unlock()
	stopConsuming(sub)
	if name != "" {
		f.drop(name)
	}
}

// restart replaces the consumer with one from one past the last entry
// delivered, trying again with a growing pause while the server cannot
// make it, until the follower ends. It asks only while connected: a
// request sent as the server shuts down is lost, and would be waited for
// in vain. The old consumer is deleted in the background (drops).
func (f *Follower) restart(ctx context.Context, status <-chan nats.Status, drops *sync.WaitGroup) {
	f.mu.Lock()
	f.gen++ // the old consumer's deliveries are ignored from here on
	sub, name := f.sub, f.name
	f.sub, f.name = nil, ""
	f.mu.Unlock()
	stopConsuming(sub)
	if name != "" {
		drops.Add(1)
		go func() {
			defer drops.Done()
			f.drop(name)
		}()
	}
	pause := followRetryFirst
	for !f.stopping(ctx) {
		if !f.j.nc.IsConnected() {
			f.wait(ctx, status, nil)
			continue
		}
		// What the connection did before this attempt is seen to by it.
		drain(status)
		err := f.start(ctx)
		if err == nil {
			return
		}
		f.j.log.Warn("journal: following a session: making its consumer again", "err", err)
		t := time.NewTimer(pause)
		f.wait(ctx, status, t.C)
		t.Stop()
		pause = min(2*pause, followRetryMax)
	}
}

// wait returns when the connection's status changes, at the timer, or
// when the follower is told to end.
func (f *Follower) wait(ctx context.Context, status <-chan nats.Status, timer <-chan time.Time) {
	select {
	case <-status:
	case <-timer:
	case <-f.stop:
	case <-ctx.Done():
	case <-f.j.bgCtx.Done():
	}
}

// drain empties a status channel without waiting.
func drain(status <-chan nats.Status) {
	for {
		select {
		case <-status:
		default:
			return
		}
	}
}

// stopping says whether the follower has been told to end.
func (f *Follower) stopping(ctx context.Context) bool {
	select {
	case <-f.stop:
	case <-ctx.Done():
	case <-f.j.bgCtx.Done():
	default:
		return false
	}
	return true
}

// end records why the follower ended and closes Entries, unless a
// delivery ended it first.
func (f *Follower) end(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endLocked(err)
}

func (f *Follower) endLocked(err error) {
	if f.ended {
		return
	}
	f.ended, f.err = true, err
	close(f.entries)
}

// stopConsuming stops a consumer's deliveries and waits (a bounded time)
// for the client to let go of its subscription.
func stopConsuming(sub jetstream.ConsumeContext) {
	if sub == nil {
		return
	}
	sub.Stop()
	t := time.NewTimer(followRequest)
	defer t.Stop()
	select {
	case <-sub.Closed():
	case <-t.C:
	}
}

// drop deletes a follower's consumer on the server; one left behind is
// dropped by the server after its inactive threshold anyway.
func (f *Follower) drop(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), followRequest)
	defer cancel()
	err := f.j.stream.DeleteConsumer(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, nats.ErrConnectionClosed) {
		f.j.log.Warn("journal: dropping a follower's consumer", "consumer", name, "err", err)
	}
}
