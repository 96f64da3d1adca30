package journal

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Fences: hosts sharing sessions take each by a lease, but a lease is
// only as good as its holder's clock, and a holder frozen past its lease
// (a long pause, SIGSTOP, a partitioned VM) wakes still sure it holds the
// session. So the journal fences a session's appends by the server:
// a host that takes a session records its claim under the session's
// holder subject (Claim), and each append of the session after carries
// the claim's sequence as what the holder subject's last message must be
// (JetStream's Nats-Expected-Last-Subject-Sequence, checked against the
// holder subject). Once another host claims the session, the server
// refuses every append of the old claim, whatever the old holder's clock
// says: ErrFenced. A session never claimed is appended to unfenced, as a
// host alone does.

// ErrFenced is an append's error when another holder claimed the session
// since this one did: nothing of the refused messages was kept.
var ErrFenced = errors.New("journal: another host claimed the session")

// errWrongLastSequence is JetStream's error code for an expectation on a
// subject's last sequence that does not hold. (10164, "wrong last
// sequence" with no sequence, is a clustered server's for one it cannot
// check now, as a claim is in flight: tried again, it is answered.)
const (
	errWrongLastSequence         jetstream.ErrorCode = 10071
	errWrongLastSequenceInFlight jetstream.ErrorCode = 10164
)

// holderSubject is where a session's claims are recorded: a token of the
// session's own, so no read of its entries matches it.
func (j *Journal) holderSubject(session string) string {
	return j.subject(session) + ".holder"
}

// Claim records that holder takes session from now: the appends of the
// session through this journal carry the claim, and those of any earlier
// claim, through any journal, are refused from now on. It returns the
// claim's sequence.
func (j *Journal) Claim(ctx context.Context, session, holder string) (uint64, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	if err := checkSession(session); err != nil {
		return 0, err
	}
	if len(holder) > 256 {
		return 0, fmt.Errorf("journal: a holder name of %d bytes, at most 256", len(holder))
	}
	st := j.state(session)
	// Held across the claim: no append of the session goes out between
	// the claim and the fence it sets.
	st.order.Lock()
	defer st.order.Unlock()
	ack, err := j.publishOne(ctx, j.holderSubject(session), []byte(holder))
	if err != nil {
		return 0, fmt.Errorf("journal: claiming a session: %w", err)
	}
	j.mu.Lock()
	st.fence, st.holder = ack.Sequence, holder
	j.mu.Unlock()
	// The older claims go; what is left is read as the newest.
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.holderSubject(session)), jetstream.WithPurgeKeep(1)); err != nil {
		j.log.Warn("journal: purging a session's older claims", "err", err)
	}
	return ack.Sequence, nil
}

// reclaim answers an append of the session refused as fenced: when no
// claim of it is left (the stream's age limit took the claim of a holder
// that appended nothing for that long), this journal's holder claims it
// again, on the condition that nobody did meanwhile, and the append is to
// be tried again; otherwise another host claimed it, and err stands.
func (j *Journal) reclaim(ctx context.Context, session string, st *sessionState, err error) error {
	j.mu.Lock()
	holder := st.holder
	j.mu.Unlock()
	subject := j.holderSubject(session)
	if _, gerr := j.stream.GetLastMsgForSubject(ctx, subject); !errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return err
	}
	st.order.Lock()
	defer st.order.Unlock()
	m := &nats.Msg{Subject: subject, Data: []byte(holder), Header: nats.Header{}}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, perr := j.js.PublishMsg(ctx, m)
	if perr != nil {
		return err // claimed by another meanwhile, or not to be known now
	}
	j.mu.Lock()
	st.fence = ack.Sequence
	j.mu.Unlock()
	j.log.Info("journal: a session's claim had expired; claimed again", "holder", holder)
	return fmt.Errorf("journal: the session's claim had expired and was made again: append again (%v)", err)
}

// Unclaim stops fencing the session's appends through this journal, as
// its holder lets it go; another's claim fences them again.
func (j *Journal) Unclaim(session string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if st := j.sessions[session]; st != nil {
		st.fence = 0
	}
}

// fenced is the message of one entry to publish: with the session's
// claim as the expectation on its holder subject when it has one, which
// it reports.
func (j *Journal) fenced(session string, st *sessionState, m *nats.Msg) (*nats.Msg, bool) {
	j.mu.Lock()
	fence := st.fence
	j.mu.Unlock()
	if fence == 0 {
		return m, false
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(fence, 10))
	// (The subject the expectation is checked against: nats-server 2.11
	// and later.)
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, j.holderSubject(session))
	return m, true
}

// fenceError reads a refused publish: ErrFenced when another claim took
// the session, err as it is otherwise.
func fenceError(err error) error {
	var api *jetstream.APIError
	if !errors.Is(err, ErrFenced) && errors.As(err, &api) && api.ErrorCode == errWrongLastSequence {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}
