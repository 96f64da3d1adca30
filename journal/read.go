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
// most MaxReadLimit). A page shorter than limit is the end; to page on,
// pass the last entry's Seq as after.
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
	entries := make([]Entry, 0, min(limit, 256))
	err = j.scan(ctx, subjects, after, limit, false, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("journal: reading entry: %w", err)
		}
		session, err := j.sessionOf(m.Subject())
		if err != nil {
			return err
		}
		entries = append(entries, Entry{Session: session, Seq: meta.Sequence.Stream, Time: meta.Timestamp, Data: m.Data()})
		return nil
	})
	return entries, err
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

// fetchBatch is the most one pull request asks for.
const fetchBatch = 1000

// scan hands each message on the subjects after the sequence, up to limit
// (0: all), to each, in stream order, through a short-lived consumer that
// keeps its state in memory and is deleted at the end. headersOnly
// delivers headers and sizes without the data.
func (j *Journal) scan(ctx context.Context, subjects []string, after uint64, limit int, headersOnly bool, each func(jetstream.Msg) error) error {
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
	pending := cons.CachedInfo().NumPending
	for got := 0; pending > 0 && (limit == 0 || got < limit); {
		want := fetchBatch
		if limit > 0 {
			want = min(want, limit-got)
		}
		if uint64(want) > pending {
			want = int(pending)
		}
		batch, err := cons.FetchNoWait(want)
		if err != nil {
			return fmt.Errorf("journal: reading: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			if err := each(m); err != nil {
				return err
			}
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("journal: reading: %w", err)
		}
		if n == 0 {
			break
		}
		got += n
		pending -= uint64(n)
	}
	return nil
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
