package journal

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// sessionState is what the journal keeps in memory about a session it has
// appended to since Open.
type sessionState struct {
	// order is held while a batch is published, so that batches appended
	// to one session concurrently do not interleave; the acks are awaited
	// outside it.
	order sync.Mutex

	// Guarded by Journal.mu: the data bytes the session holds as far as
	// this process knows (exact after a trim, approximate otherwise),
	// whether a trim has measured it since Open, and whether one runs.
	bytes    int64
	measured bool
	trimming bool
}

// state returns the session's state, creating it on first use.
func (j *Journal) state(session string) *sessionState {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.sessions[session]
	if st == nil {
		st = &sessionState{}
		j.sessions[session] = st
	}
	return st
}

// Append adds entries to the end of a session's stream, in order, and
// returns their sequence numbers, each greater than any handed out before.
// It publishes the whole batch before waiting for the server's acks, so a
// batch costs about one round trip. On error a prefix of the batch may
// have been kept; the error says which entry failed.
func (j *Journal) Append(ctx context.Context, session string, entries ...[]byte) ([]uint64, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if len(entries) > MaxBatch {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrBatchTooLarge, len(entries), MaxBatch)
	}
	var total int64
	for i, e := range entries {
		if len(e) > j.maxEntry {
			return nil, fmt.Errorf("%w: entry %d is %d bytes, at most %d", ErrEntryTooLarge, i, len(e), j.maxEntry)
		}
		total += int64(len(e))
	}
	if len(entries) == 0 {
		return nil, nil
	}
	st := j.state(session)
	futures, err := j.publish(st, j.subject(session), entries)
	seqs := make([]uint64, 0, len(futures))
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			seqs = append(seqs, ack.Sequence)
		case err := <-f.Err():
			return seqs, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), err)
		case <-ctx.Done():
			return seqs, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), ctx.Err())
		}
	}
	if err != nil {
		return seqs, err
	}
	j.account(session, st, total)
	return seqs, nil
}

// publish sends a batch without waiting for acks, holding the session's
// order so the batch stays contiguous within the session.
func (j *Journal) publish(st *sessionState, subject string, entries [][]byte) ([]jetstream.PubAckFuture, error) {
	st.order.Lock()
	defer st.order.Unlock()
	futures := make([]jetstream.PubAckFuture, 0, len(entries))
	for i, e := range entries {
		// When too many appends await their acks, wait for room rather
		// than fail.
		f, err := j.js.PublishAsync(subject, e, jetstream.WithStallWait(ackTimeout))
		if err != nil {
			return futures, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), err)
		}
		futures = append(futures, f)
	}
	return futures, nil
}
