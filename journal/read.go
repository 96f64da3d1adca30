package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Entry is one appended entry as read back.
type Entry struct {
	Session string    // the session it was appended to
	Seq     uint64    // its sequence number, unique in the journal
	Time    time.Time // when the server stored it
	Data    []byte    // what was appended
}

// Read returns up to limit of the session's entries with a sequence
// greater than after, oldest first (limit 0 means DefaultReadLimit, at
// most MaxReadLimit). To page on, pass the last entry's Seq as after.
//
// A page shorter than limit is the end: the read goes on until it has
// every entry up to the session's newest as of its start (or limit of
// them), however slowly the server delivers them, or it fails (with
// ErrReadIncomplete when the server keeps holding back entries it says
// it has). It never returns a short page that is not the end. Entries
// that retention or Delete take while it runs are not waited for.
func (j *Journal) Read(ctx context.Context, session string, after uint64, limit int) ([]Entry, error) {
	return j.ReadSessions(ctx, []string{session}, after, limit)
}

// ReadSessions is Read across several sessions (at most MaxReadSessions,
// duplicates ignored): their entries after the sequence, merged in
// sequence order.
func (j *Journal) ReadSessions(ctx context.Context, sessions []string, after uint64, limit int) ([]Entry, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	subjects, err := j.subjects(sessions)
	if err != nil {
		return nil, err
	}
	end, err := j.endOf(ctx, subjects)
	if err != nil {
		return nil, err
	}
	// The sessions' subjects alone: one message each entry, whole or its
	// last chunk. (A consumer of their part subjects too would be off the
	// server's fast path for one subject, and read a session half as fast
	// out of a stream of many; the chunks of a chunked entry, which is
	// large, are fetched on their own.)
	entries := make([]Entry, 0, min(limit, 256))
	sp := scanSpec{subjects: subjects, ends: subjects, after: after, end: end, want: limit}
	err = j.scan(ctx, sp, func(d *delivery) (int, error) {
		data, err := j.entryOf(ctx, d.subject, d.seq, d.header, d.data)
		if err != nil {
			return 0, err
		}
		if data != nil {
			session, err := j.sessionOf(d.subject)
			if err != nil {
				return 0, err
			}
			entries = append(entries, Entry{Session: session, Seq: d.seq, Time: d.time, Data: data})
		}
		return limit - len(entries), nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// entryOf is the entry a message on a session's subject ends: the
// message's data, or, for a chunked entry's last chunk, the whole entry
// read back (nil when it is not whole).
func (j *Journal) entryOf(ctx context.Context, subject string, seq uint64, h nats.Header, data []byte) ([]byte, error) {
	info, chunked, err := chunkOf(h)
	switch {
	case err != nil:
		return nil, err
	case !chunked:
		return data, nil
	case info.index != info.count-1:
		return nil, nil // a chunk but the last: not the journal's
	}
	entry, err := j.chunkedEntry(ctx, subject, info, seq)
	if err == nil && entry == nil {
		j.log.Debug("journal: skipping an entry that is not whole", "seq", seq)
	}
	return entry, err
}

// checkLimit applies the default and the bound of a read's limit.
func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultReadLimit, nil
	case limit < 0 || limit > MaxReadLimit:
		return 0, fmt.Errorf("%w: %d, want 1 to %d", ErrBadLimit, limit, MaxReadLimit)
	}
	return limit, nil
}

// subjects checks sessions and returns their distinct subjects.
func (j *Journal) subjects(sessions []string) ([]string, error) {
	if len(sessions) == 0 {
		return nil, fmt.Errorf("%w: no session named", ErrBadSession)
	}
	if len(sessions) > MaxReadSessions {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManySessions, len(sessions), MaxReadSessions)
	}
	seen := make(map[string]bool, len(sessions))
	subjects := make([]string, 0, len(sessions))
	for _, s := range sessions {
		if err := checkSession(s); err != nil {
			return nil, err
		}
		if !seen[s] {
			seen[s] = true
			subjects = append(subjects, j.subject(s))
		}
	}
	return subjects, nil
}

// Bounds on how a read fetches from its consumer.
const (
	// fetchBatch is the most messages one fetch asks for.
	fetchBatch = 1000
	// fetchWait bounds one fetch. The server answers a fetch as soon as
	// it has delivered the batch, or everything there is; it waits this
	// long only when there is nothing to deliver at all.
	fetchWait = 2 * time.Second
	// fetchTries is how many fetches in a row may bring nothing, while
	// the stream still holds entries the read has not reached, before the
	// read gives up with ErrReadIncomplete.
	fetchTries = 8
	// fetchPause is the first pause after a fetch that brought nothing;
	// it doubles up to fetchPauseMax.
	fetchPause    = 10 * time.Millisecond
	fetchPauseMax = 500 * time.Millisecond
	// fetchMinBytes is the least one fetch may bring; a fetch brings at
	// most the larger of it and two of the server's largest messages, so
	// a batch of large chunks never floods the client.
	fetchMinBytes = 8 << 20
)

// endOf is the sequence a read of the subjects must get to: for one
// subject, the sequence of its newest message (0 when it holds none);
// for several, the stream's newest sequence, at or past the newest of
// theirs (one request, where theirs would be one a session; the scan
// ends at the end of the stream, and a consumer with nothing to deliver
// is not fetched from). A read that gets there has read everything that
// was there when it began.
func (j *Journal) endOf(ctx context.Context, subjects []string) (uint64, error) {
	if len(subjects) > 1 {
		info, err := j.stream.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("journal: reading: stream info: %w", err)
		}
		return info.State.LastSeq, nil
	}
	m, err := j.stream.GetLastMsgForSubject(ctx, subjects[0])
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: reading: the newest entry: %w", err)
	}
	return m.Sequence, nil
}

// A delivery is one message a scan hands over.
type delivery struct {
	subject string
	header  nats.Header
	data    []byte
	seq     uint64    // its stream sequence
	time    time.Time // when the server stored it
}

// scanSpec is what a scan reads.
type scanSpec struct {
	subjects []string // the consumer's filter
	// ends are the subjects whose messages up to end the scan must hand
	// over (those of subjects, or some of them).
	ends        []string
	after, end  uint64 // the messages after after, up to end
	want        int    // the least number of messages wanted at first
	headersOnly bool   // headers and sizes, without the data
}

// scan hands each message on the subjects with a sequence greater than
// after to each, in stream order, through a short-lived consumer that
// keeps its state in memory and is deleted at the end. It goes on until
// it has handed over the message with sequence end or one past it, or
// until the stream holds nothing more for it (what was there went while
// it ran), or until each says it needs no more messages. want, and then
// what each returns, is the least number of messages still wanted (0:
// stop), which bounds the next fetch.
//
// Nothing the consumer says of itself while it delivers is taken for
// the end: its count of pending messages is kept incrementally by the
// server and can run low under load (a no-wait fetch answered empty from
// that count while the stream held more once cut a restart's read at its
// 1,000th entry); only the count the server takes from its store as it
// makes the consumer is trusted, for "nothing at all". The
// scan's fetches are no-wait requests that wait when nothing can be
// delivered yet, which the server ends once its store has nothing more
// (fetch); when one brings nothing, the scan asks the stream whether
// anything it must hand over is left (left) and fetches again, and when
// fetches keep bringing nothing while something is, it fails with
// ErrReadIncomplete rather than return short.
func (j *Journal) scan(ctx context.Context, sp scanSpec, each func(*delivery) (int, error)) error {
	if sp.end <= sp.after {
		return nil
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       sp.after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		HeadersOnly:       sp.headersOnly,
		InactiveThreshold: time.Minute,
	}
	if len(sp.subjects) == 1 {
		cfg.FilterSubject = sp.subjects[0]
	} else {
		cfg.FilterSubjects = sp.subjects
	}
	cons, err := j.createConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("journal: reading: %w", err)
	}
	r := reader{j: j, cfg: cfg, name: cons.CachedInfo().Name, sp: sp, last: sp.after, need: sp.want}
	defer func() { j.dropConsumer(r.name) }()
	if cons.CachedInfo().NumPending == 0 {
		// Nothing to read. This count, unlike the consumer's later ones,
		// is the store's own: the server counts it in the store as it
		// makes the consumer, before any delivery.
		return nil
	}
	return r.run(ctx, each)
}

// reader is one scan's progress through its consumer.
type reader struct {
	j    *Journal
	cfg  jetstream.ConsumerConfig
	name string // the consumer's
	sp   scanSpec
	last uint64 // the sequence of the last message handed over
	need int    // what each last said it still wants
	// abandoned is set when a fetch was given up on before the server
	// ended it: the server may have gone on delivering to it, and what
	// it delivered the consumer counts as taken (it acknowledges
	// nothing), so the consumer is replaced (renew).
	abandoned bool
}

func (r *reader) run(ctx context.Context, each func(*delivery) (int, error)) error {
	pause := fetchPause
	for empty := 0; r.last < r.sp.end && r.need > 0; {
		got, done, err := r.fetch(ctx, each)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if r.abandoned {
			if err := r.renew(ctx); err != nil {
				return err
			}
		}
		if got > 0 {
			empty, pause = 0, fetchPause
			continue
		}
		more, err := r.left(ctx)
		if err != nil || !more {
			return err
		}
		if empty++; empty >= fetchTries {
			return fmt.Errorf("%w: %d fetches in a row brought nothing past sequence %d, short of %d, which the stream holds",
				ErrReadIncomplete, empty, r.last, r.sp.end)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("journal: reading: %w", ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, fetchPauseMax)
	}
	return nil
}

// pullRequest is a fetch as the server takes it. With NoWait and Expires
// both set, the server delivers what it has and ends the request when
// its store has nothing more (after at least one message), or waits up
// to Expires for a first one; it never answers "no messages" from the
// consumer's count of pending messages alone, as it does a request
// without Expires. (It finds a consumer's next message in its store in
// one step, LoadNextMsg, so "nothing more" is the store's answer: what
// was there when the read began, and was not purged since, is found.)
type pullRequest struct {
	Batch    int           `json:"batch"`
	MaxBytes int           `json:"max_bytes,omitempty"`
	NoWait   bool          `json:"no_wait"`
	Expires  time.Duration `json:"expires"`
}

// fetch sends one pull request and hands what comes to each. It returns
// how many messages came, and done when the scan has what it needs or
// the server said it has nothing more.
func (r *reader) fetch(ctx context.Context, each func(*delivery) (int, error)) (got int, done bool, err error) {
	if f := r.j.fetchFault; f != nil && f() {
		return 0, false, nil
	}
	nc := r.j.nc
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, fmt.Errorf("journal: reading: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	maxBytes := r.j.fetchBytes()
	if err := sub.SetPendingLimits(2*fetchBatch, 2*maxBytes); err != nil {
		return 0, false, fmt.Errorf("journal: reading: %w", err)
	}
	batch := min(fetchBatch, max(r.need, 1))
	req, err := json.Marshal(pullRequest{Batch: batch, MaxBytes: maxBytes, NoWait: true, Expires: fetchWait})
	if err != nil {
		return 0, false, fmt.Errorf("journal: reading: %w", err)
	}
	// The API subject of the journal's JetStream (no domain, no prefix).
	subject := "$JS.API.CONSUMER.MSG.NEXT." + r.j.cfg.Stream + "." + r.name
	if err := nc.PublishRequest(subject, inbox, req); err != nil {
		return 0, false, fmt.Errorf("journal: reading: %w", err)
	}
	// The server answers within fetchWait; a second more for the way.
	fctx, cancel := context.WithTimeout(ctx, fetchWait+time.Second)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(fctx)
		if err != nil {
			if ctx.Err() != nil {
				return got, false, fmt.Errorf("journal: reading: %w", ctx.Err())
			}
			// The answer was lost, or is slower than the bound (a loaded
			// machine): asked again, of a new consumer.
			r.abandoned = true
			return got, false, nil
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch status := m.Header.Get("Status"); status {
			case "100": // a heartbeat
				continue
			case "404": // nothing more in the store
				return got, got > 0, nil
			case "408": // expired: nothing came
				return got, false, nil
			case "409":
				// The batch's bytes are spent (the next message did not
				// fit), or the consumer is gone.
				if d := m.Header.Get("Description"); d == "Batch Completed" || strings.Contains(d, "Exceeds MaxBytes") {
					return got, false, nil
				}
				return got, false, fmt.Errorf("journal: reading: the server ended a fetch: %s %.80s", status, m.Header.Get("Description"))
			default:
				return got, false, fmt.Errorf("journal: reading: the server answered a fetch: %s %.80s", status, m.Header.Get("Description"))
			}
		}
		meta, err := m.Metadata()
		if err != nil {
			return got, false, fmt.Errorf("journal: reading: entry metadata: %w", err)
		}
		got++
		r.last = meta.Sequence.Stream
		if r.need, err = each(&delivery{subject: m.Subject, header: m.Header, data: m.Data, seq: r.last, time: meta.Timestamp}); err != nil {
			return got, false, err
		}
		if r.need <= 0 || r.last >= r.sp.end {
			return got, true, nil
		}
		if got == batch {
			return got, false, nil
		}
		if f := r.j.fetchCut; f != nil && f(got) {
			r.abandoned = true
			return got, false, nil
		}
	}
}

// renew replaces the reader's consumer with one that starts after the
// last message handed over. The old one is deleted first, which ends the
// fetch given up on, if it still runs.
func (r *reader) renew(ctx context.Context) error {
	r.abandoned = false
	r.j.dropConsumer(r.name)
	cfg := r.cfg
	cfg.OptStartSeq = r.last + 1
	cons, err := r.j.createConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("journal: reading: %w", err)
	}
	r.name = cons.CachedInfo().Name
	return nil
}

// left reports whether the stream still holds a message on the scan's
// end subjects after the last one handed over and up to its end.
func (r *reader) left(ctx context.Context) (bool, error) {
	for _, subject := range r.sp.ends {
		m, err := r.j.stream.GetMsg(ctx, r.last+1, jetstream.WithGetMsgSubject(subject))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, fmt.Errorf("journal: reading: %w", err)
		case m.Sequence <= r.sp.end:
			return true, nil
		}
	}
	return false, nil
}

// fetchBytes bounds what one fetch brings.
func (j *Journal) fetchBytes() int {
	return max(fetchMinBytes, 2*int(j.nc.MaxPayload())+64<<10)
}

// consumerTimeout bounds one request to make a read's consumer.
const consumerTimeout = 3 * time.Second

// createConsumer makes a read's consumer. On a cluster the stream may have
// no leader for a moment (just made, or electing one after a node left):
// the request finds no responder, or no answer in time. It is asked again,
// waiting 50 ms and then twice as long each time, for about half a minute
// at most, or until ctx ends.
func (j *Journal) createConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	wait := 50 * time.Millisecond
	for {
		ask, cancel := context.WithTimeout(ctx, consumerTimeout)
		cons, err := j.stream.CreateConsumer(ask, cfg)
		cancel()
		notYet := errors.Is(err, nats.ErrNoResponders) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil)
		if err == nil || !notYet || wait > 8*time.Second {
			return cons, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait *= 2
	}
}

// dropConsumer deletes a read's consumer; the server drops one left
// behind after its inactive threshold anyway.
func (j *Journal) dropConsumer(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		j.log.Warn("journal: dropping a read's consumer", "consumer", name, "err", err)
	}
}

// SessionLastSeq is the sequence of the session's newest entry, 0 when
// it holds none.
func (j *Journal) SessionLastSeq(ctx context.Context, session string) (uint64, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	if err := checkSession(session); err != nil {
		return 0, err
	}
	m, err := j.stream.GetLastMsgForSubject(ctx, j.subject(session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: newest entry of a session: %w", err)
	}
	return m.Sequence, nil
}

// Newest returns the newest entry of any session, and false when the
// journal holds none: where a host that starts again takes up.
func (j *Journal) Newest(ctx context.Context) (Entry, bool, error) {
	if err := j.check(); err != nil {
		return Entry{}, false, err
	}
	// One token after the prefix: entries (whole, or their last chunks),
	// not the floor records, marks or chunks but the last.
	m, err := j.stream.GetLastMsgForSubject(ctx, j.cfg.Subject+".*")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("journal: newest entry: %w", err)
	}
	session, err := j.sessionOf(m.Subject)
	if err != nil {
		return Entry{}, false, err
	}
	data, err := j.entryOf(ctx, m.Subject, m.Sequence, m.Header, m.Data)
	if err != nil {
		return Entry{}, false, fmt.Errorf("journal: newest entry: %w", err)
	}
	if data == nil {
		// Not whole: its first chunks are gone (expiring by age, as the
		// rest will).
		return Entry{}, false, nil
	}
	return Entry{Session: session, Seq: m.Sequence, Time: m.Time, Data: data}, true, nil
}
