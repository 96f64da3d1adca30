package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
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
	// fence is the sequence of this journal's claim of the session, which
	// its appends carry, and holder who claimed it (fence.go); 0 and ""
	// when it has none.
	fence  uint64
	holder string
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
// batch costs about one round trip. An entry larger than the server's
// maximum payload goes as several messages (chunk.go), which costs one
// more round trip each; its sequence is its last message's. On error a
// prefix of the batch may have been kept; the error says which entry
// failed.
func (j *Journal) Append(ctx context.Context, session string, entries ...[]byte) ([]uint64, error) {
	return j.append(ctx, session, entries, fullFloor)
}

// AppendReserve is Append for entries that end work the caller cannot go
// on with because the disk is full (a turn's end): it may use the room
// Config.MinFreeBytes keeps free, and, when another program took that,
// the reserve file the journal keeps in its store (half the floor, made
// while there is room), so that what clients saw start is recorded
// ending too.
func (j *Journal) AppendReserve(ctx context.Context, session string, entries ...[]byte) ([]uint64, error) {
	return j.append(ctx, session, entries, halfFloor)
}

func (j *Journal) append(ctx context.Context, session string, entries [][]byte, share floorShare) ([]uint64, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if len(entries) > MaxBatch {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrBatchTooLarge, len(entries), MaxBatch)
	}
	var total, stored int64
	for i, e := range entries {
		if len(e) > j.maxEntry {
			return nil, fmt.Errorf("%w: entry %d is %d bytes, at most %d", ErrEntryTooLarge, i, len(e), j.maxEntry)
		}
		total += int64(len(e))
		stored += int64(len(e)) + int64(1+len(e)/j.maxMsg)*messageOverhead
	}
	if len(entries) == 0 {
		return nil, nil
	}
	full, err := j.room(ctx, stored, share)
	if err != nil {
		return nil, err
	}
	st := j.state(session)
	sent, err := j.publish(ctx, st, session, entries, full)
	seqs := make([]uint64, 0, len(sent))
	for i, futures := range sent {
		var ack *jetstream.PubAck
		for _, f := range futures {
			a, err := j.await(ctx, f, full)
			if errors.Is(err, ErrFenced) {
				err = j.reclaim(ctx, session, st, err)
			}
			if err != nil {
				return seqs, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), err)
			}
			ack = a
		}
		seqs = append(seqs, ack.Sequence)
	}
	if err != nil {
		return seqs, err
	}
	j.account(session, st, total)
	return seqs, nil
}

// publish sends a batch without waiting for acks (but for a chunked
// entry's first chunk's, which full also ends, and each message of a
// fenced session's: send), holding the session's order so the batch
// stays contiguous within the session. It returns each entry's futures,
// the one of its last message last, up to the first refused.
func (j *Journal) publish(ctx context.Context, st *sessionState, session string, entries [][]byte, full <-chan struct{}) ([][]jetstream.PubAckFuture, error) {
	st.order.Lock()
	defer st.order.Unlock()
	subject := j.subject(session)
	sent := make([][]jetstream.PubAckFuture, 0, len(entries))
	for i, e := range entries {
		if len(e) > j.maxMsg {
			futures, more, err := j.publishChunks(ctx, session, st, e, full)
			if err != nil {
				return sent, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), err)
			}
			sent = append(sent, futures)
			if !more {
				break
			}
			continue
		}
		f, more, err := j.send(ctx, session, st, &nats.Msg{Subject: subject, Data: e}, full)
		if err != nil {
			return sent, fmt.Errorf("journal: appending entry %d of %d: %w", i, len(entries), err)
		}
		sent = append(sent, []jetstream.PubAckFuture{f})
		if !more {
			break
		}
	}
	return sent, nil
}

// send publishes one message of a session's and returns its future, and
// whether the batch may go on. A fenced session's message is awaited
// before the next goes: a clustered server takes one message at a time
// that expects the holder subject's last sequence (a second in flight is
// refused), and nothing sent after a refused one may be kept.
func (j *Journal) send(ctx context.Context, session string, st *sessionState, m *nats.Msg, full <-chan struct{}) (jetstream.PubAckFuture, bool, error) {
	m, fenced := j.fenced(session, st, m)
	// When too many appends await their acks, wait for room rather than
	// fail.
	f, err := j.js.PublishMsgAsync(m, jetstream.WithStallWait(ackTimeout))
	if err != nil || !fenced {
		return f, true, err
	}
	done := &settled{msg: m, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	ack, err := j.await(ctx, f, full)
	if err != nil {
		done.err <- err
		return done, false, nil
	}
	done.ok <- ack
	return done, true, nil
}

// settled is a future whose ack (or error) is in already.
type settled struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (s *settled) Ok() <-chan *jetstream.PubAck { return s.ok }
func (s *settled) Err() <-chan error            { return s.err }
func (s *settled) Msg() *nats.Msg               { return s.msg }
