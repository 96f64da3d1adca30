package journal

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// Delete purges all of a session's entries. Their sequence numbers are
// never handed out again.
func (j *Journal) Delete(ctx context.Context, session string) error {
	if err := j.check(); err != nil {
		return err
	}
	if err := checkSession(session); err != nil {
		return err
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.subject(session))); err != nil {
		return fmt.Errorf("journal: deleting a session: %w", err)
	}
	j.mu.Lock()
	delete(j.sessions, session)
	j.mu.Unlock()
	return nil
}

// account adds appended bytes to the session's count and starts a trim
// when the count is over budget, or has never been measured since Open
// (a session may come back from a restart already near its budget).
func (j *Journal) account(session string, st *sessionState, n int64) {
	budget := j.cfg.MaxBytesPerSession
	if budget == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	st.bytes += n
	if j.closed || st.trimming || (st.measured && st.bytes <= budget) {
		return
	}
	st.trimming = true
	j.bg.Add(1)
	go j.trim(session, st, st.bytes)
}

// trim measures the session's entries and, when they are over budget,
// purges the oldest so that the rest fits in three quarters of it. counted
// is the session's count when the trim started: what is appended while it
// runs is added on top of what it measured.
func (j *Journal) trim(session string, st *sessionState, counted int64) {
	defer j.bg.Done()
	kept, err := j.trimTo(j.bgCtx, j.subject(session), j.cfg.MaxBytesPerSession, j.cfg.MaxBytesPerSession*3/4)
	j.mu.Lock()
	defer j.mu.Unlock()
	st.trimming = false
	if err != nil {
		if j.bgCtx.Err() == nil {
			j.log.Warn("journal: trimming a session to its byte budget", "err", err)
		}
		return
	}
	st.bytes = kept + st.bytes - counted
	st.measured = true
	if st.bytes > j.cfg.MaxBytesPerSession && !j.closed {
		// What was appended while this trim ran took it over again.
		st.trimming = true
		j.bg.Add(1)
		go j.trim(session, st, st.bytes)
	}
}

// span is one entry's sequence and data size, as a trim measures them.
type span struct {
	seq  uint64
	size int64
}

// trimTo reads the sizes of the subject's entries (headers only) and, if
// they add up to more than budget, purges the oldest until the rest fits
// in low. It returns the bytes kept.
func (j *Journal) trimTo(ctx context.Context, subject string, budget, low int64) (int64, error) {
	var spans []span
	var total int64
	err := j.scan(ctx, []string{subject}, 0, 0, true, func(m jetstream.Msg) error {
		size, err := strconv.ParseInt(m.Headers().Get("Nats-Msg-Size"), 10, 64)
		if err != nil {
			return fmt.Errorf("journal: entry size header: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("journal: entry metadata: %w", err)
		}
		spans = append(spans, span{meta.Sequence.Stream, size})
		total += size
		return nil
	})
	if err != nil || total <= budget {
		return total, err
	}
	kept := total
	cut := 0
	for cut < len(spans) && kept > low {
		kept -= spans[cut].size
		cut++
	}
	if cut == len(spans) {
		// Purge up to and including the last measured entry.
		err = j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(spans[cut-1].seq+1))
	} else {
		err = j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(spans[cut].seq))
	}
	if err != nil {
		return total, fmt.Errorf("journal: purging a session's oldest entries: %w", err)
	}
	return kept, nil
}
