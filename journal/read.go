package journal

import (
	"context"
	"errors"
	"fmt"
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
	entries := make([]Entry, 0, min(limit, 256))
	err = j.scan(ctx, subjects, after, end, limit, false, func(m jetstream.Msg, meta *jetstream.MsgMetadata) (int, error) {
		session, err := j.sessionOf(m.Subject())
		if err != nil {
			return 0, err
		}
		entries = append(entries, Entry{Session: session, Seq: meta.Sequence.Stream, Time: meta.Timestamp, Data: m.Data()})
		return limit - len(entries), nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
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
	// fetchWait bounds one fetch. A fetch never asks for more messages
	// than the consumer says it holds, so the server answers as soon as
	// they are delivered; it waits this long only when entries went while
	// the read ran (purged, deleted), or the consumer lags far behind.
	fetchWait = 2 * time.Second
	// fetchTries is how many fetches in a row may bring nothing while the
	// consumer says more is pending before the read gives up with
	// ErrReadIncomplete.
	fetchTries = 8
	// fetchPause is the first pause after a fetch that brought nothing;
	// it doubles up to fetchPauseMax.
	fetchPause    = 10 * time.Millisecond
	fetchPauseMax = 500 * time.Millisecond
	// fetchMinBytes is the least one fetch may bring; a fetch brings at
	// most the larger of it and two of the server's largest messages, so
	// a batch of large entries never floods the client.
	fetchMinBytes = 8 << 20
)

// endOf is the sequence a read of the subjects must get to: the newest
// message on the subject when there is one subject (0 when it holds
// none), otherwise the stream's newest sequence, at or past the newest
// message on any of them. A read that reaches it has read everything
// that was there when it began.
func (j *Journal) endOf(ctx context.Context, subjects []string) (uint64, error) {
	if len(subjects) == 1 {
		m, err := j.stream.GetLastMsgForSubject(ctx, subjects[0])
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("journal: reading: the newest entry: %w", err)
		}
		return m.Sequence, nil
	}
	info, err := j.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("journal: reading: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// scan hands each message on the subjects with a sequence greater than
// after to each, in stream order, through a short-lived consumer that
// keeps its state in memory and is deleted at the end. It goes on until
// it has handed over the message with sequence end or one past it, or
// until the consumer holds nothing more (what was there went while it
// ran), or until each says it needs no more messages. want, and then
// what each returns, is the least number of messages still wanted (0:
// stop), which bounds the next fetch. headersOnly delivers headers and sizes without the data.
//
// A fetch that brings nothing is not taken for the end (a pull consumer
// under load can answer an empty batch while it holds more): the scan
// asks the consumer what it holds and fetches again, and when fetches
// keep bringing nothing while the consumer says more is there, it fails
// with ErrReadIncomplete rather than return short.
func (j *Journal) scan(ctx context.Context, subjects []string, after, end uint64, want int, headersOnly bool, each func(m jetstream.Msg, meta *jetstream.MsgMetadata) (int, error)) error {
	if end <= after {
		return nil
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		HeadersOnly:       headersOnly,
		InactiveThreshold: time.Minute,
	}
	if len(subjects) == 1 {
		cfg.FilterSubject = subjects[0]
	} else {
		cfg.FilterSubjects = subjects
	}
	cons, err := j.createConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("journal: reading: %w", err)
	}
	defer j.dropConsumer(cons.CachedInfo().Name)
	r := reader{j: j, cons: cons, last: after, end: end, pending: cons.CachedInfo().NumPending, need: want}
	return r.run(ctx, each)
}

// reader is one scan's progress through its consumer.
type reader struct {
	j       *Journal
	cons    jetstream.Consumer
	last    uint64 // the sequence of the last message handed over
	end     uint64 // the sequence the scan must get to
	pending uint64 // what the consumer last said it holds past last
	need    int    // what each last said it still wants
}

func (r *reader) run(ctx context.Context, each func(jetstream.Msg, *jetstream.MsgMetadata) (int, error)) error {
	pause := fetchPause
	for empty := 0; r.last < r.end && r.pending > 0 && r.need > 0; {
		got, err := r.fetch(ctx, each)
		if err != nil {
			return err
		}
		if got > 0 {
			empty, pause = 0, fetchPause
			continue
		}
		if empty++; empty >= fetchTries {
			return fmt.Errorf("%w: %d fetches in a row brought nothing past sequence %d, short of %d, while the consumer holds %d more",
				ErrReadIncomplete, empty, r.last, r.end, r.pending)
		}
		// Asked again rather than trusted from the last delivery: what
		// was purged meanwhile is no longer pending.
		info, err := r.cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("journal: reading: consumer info: %w", err)
		}
		r.pending = info.NumPending
		if r.pending == 0 {
			break
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

// fetch asks for one batch, no more than the consumer holds, and hands
// what comes to each. It returns how many messages came.
func (r *reader) fetch(ctx context.Context, each func(jetstream.Msg, *jetstream.MsgMetadata) (int, error)) (int, error) {
	want := min(fetchBatch, r.need, int(min(r.pending, fetchBatch)))
	if f := r.j.fetchFault; f != nil && f() {
		return 0, nil
	}
	fctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel() // also ends the client's wait for a batch left unread
	batch, err := r.cons.Fetch(want, jetstream.FetchMaxBytes(r.j.fetchBytes()), jetstream.FetchContext(fctx))
	if err != nil {
		return 0, fmt.Errorf("journal: reading: %w", err)
	}
	got := 0
	for m := range batch.Messages() {
		meta, err := m.Metadata()
		if err != nil {
			return got, fmt.Errorf("journal: reading: entry metadata: %w", err)
		}
		got++
		r.last, r.pending = meta.Sequence.Stream, meta.NumPending
		if r.need, err = each(m, meta); err != nil {
			return got, err
		}
		if r.need <= 0 || r.last >= r.end {
			return got, nil
		}
	}
	err = batch.Error()
	switch {
	case err == nil, errors.Is(err, jetstream.ErrNoMessages), errors.Is(err, nats.ErrTimeout):
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// The fetch's own bound: what came is handled, the rest asked again.
	default:
		return got, fmt.Errorf("journal: reading: %w", err)
	}
	return got, nil
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
	// One token after the prefix: entries, not the floor records.
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
	return Entry{Session: session, Seq: m.Sequence, Time: m.Time, Data: m.Data}, true, nil
}
