package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// Delete purges all of a session's entries, chunks and all. Their
// sequence numbers are never handed out again.
func (j *Journal) Delete(ctx context.Context, session string) error {
	if err := j.check(); err != nil {
		return err
	}
	if err := checkSession(session); err != nil {
		return err
	}
	for _, subject := range []string{j.subject(session), j.partSubject(session), j.floorSubject(session), j.markSubject(session), j.holderSubject(session)} {
		if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			return fmt.Errorf("journal: deleting a session: %w", err)
		}
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
	kept, err := j.trimTo(j.bgCtx, session, j.cfg.MaxBytesPerSession, j.cfg.MaxBytesPerSession*3/4)
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

// span is one entry's sequence (its last chunk's, when chunked) and data
// size, as a trim measures them.
type span struct {
	seq  uint64
	size int64
}

// trimTo reads the sizes of the session's entries (headers only, of the
// messages on the session's subject: a whole entry, or a chunked entry's
// last chunk, which gives the entry's size) and, if they add up to more
// than budget, drops the oldest until the rest fits in low. It returns
// the bytes kept.
func (j *Journal) trimTo(ctx context.Context, session string, budget, low int64) (int64, error) {
	var spans []span
	var total int64
	subject := j.subject(session)
	end, err := j.endOf(ctx, []string{subject})
	if err != nil {
		return 0, err
	}
	sp := scanSpec{subjects: []string{subject}, ends: []string{subject}, end: end, want: fetchBatch, headersOnly: true}
	err = j.scan(ctx, sp, func(d *delivery) (int, error) {
		size, err := strconv.ParseInt(cmp.Or(d.header.Get(hdrEntrySize), d.header.Get("Nats-Msg-Size")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("journal: entry size header: %w", err)
		}
		spans = append(spans, span{d.seq, size})
		total += size
		return fetchBatch, nil
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
	if err := j.dropThrough(ctx, session, spans[cut-1].seq); err != nil {
		return total, err
	}
	return kept, nil
}

// dropThrough purges the session's entries up to and including seq, the
// sequence of an entry (a chunked entry's last chunk): whole entries, and
// then the chunks before it, theirs and any run a writer left unfinished.
// It first records seq as the session's floor, so that KeptFrom never
// claims an entry is kept that may be gone, even if the process dies in
// between. (Dying between the two purges leaves chunks no entry ends,
// which readers skip and the next trim purges.)
func (j *Journal) dropThrough(ctx context.Context, session string, seq uint64) error {
	floor := j.floorSubject(session)
	if _, err := j.publishOne(ctx, floor, strconv.AppendUint(nil, seq, 10)); err != nil {
		return fmt.Errorf("journal: recording a session's floor: %w", err)
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.subject(session)), jetstream.WithPurgeSequence(seq+1)); err != nil {
		return fmt.Errorf("journal: purging a session's oldest entries: %w", err)
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.partSubject(session)), jetstream.WithPurgeSequence(seq+1)); err != nil {
		return fmt.Errorf("journal: purging a session's oldest chunks: %w", err)
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(floor), jetstream.WithPurgeKeep(1)); err != nil {
		return fmt.Errorf("journal: purging a session's older floors: %w", err)
	}
	return nil
}

// KeptFrom is the sequence from which all of the session's entries are
// still in the journal: none with this sequence or a greater one has been
// dropped by retention. A reader that has seen the session through after
// can replay the rest if after+1 >= KeptFrom; otherwise entries it has not
// seen may be gone and it needs the session's state some other way. (The
// answer errs on the safe side: it may be greater than needed, never less.)
func (j *Journal) KeptFrom(ctx context.Context, session string) (uint64, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	if err := checkSession(session); err != nil {
		return 0, err
	}
	// Entries older than the stream's first were dropped, by age or purge.
	info, err := j.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("journal: stream info: %w", err)
	}
	from := info.State.FirstSeq
	// Entries up to the floor were dropped to keep the session in budget.
	m, err := j.stream.GetLastMsgForSubject(ctx, j.floorSubject(session))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return j.keptWhole(ctx, session, from, from)
	case err != nil:
		return 0, fmt.Errorf("journal: a session's floor: %w", err)
	}
	floor, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("journal: a session's floor: %w", err)
	}
	return j.keptWhole(ctx, session, max(from, floor+1), from)
}

// keptWhole is from, or past the session's first entry at or after it
// when that entry is chunked and its first chunk is older than the
// stream's first sequence: the age limit drops a stream's oldest messages
// first, and may have taken the first chunks of an entry and not yet the
// rest, which is no longer an entry.
func (j *Journal) keptWhole(ctx context.Context, session string, from, first uint64) (uint64, error) {
	m, err := j.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(j.subject(session)))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return from, nil
	case err != nil:
		return 0, fmt.Errorf("journal: a session's first entry: %w", err)
	}
	info, chunked, err := chunkOf(m.Header)
	if err == nil && chunked && info.first < first {
		return m.Sequence + 1, nil
	}
	return from, nil
}
