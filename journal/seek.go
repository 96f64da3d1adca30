package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// maxSeekSteps bounds the messages Seek passes over that are no whole
// entry (chunks of one whose first chunks are gone) before it gives up.
const maxSeekSteps = 64

// Seek returns the session's first whole entry with a sequence at or
// after from, and false when there is none: one request to the stream,
// not a consumer, so a caller can search a long session for a place in it
// (the host finds where a reconnecting client's gap begins this way, by
// bisection, when it holds no mark of its own).
func (j *Journal) Seek(ctx context.Context, session string, from uint64) (Entry, bool, error) {
	if err := j.check(); err != nil {
		return Entry{}, false, err
	}
	if err := checkSession(session); err != nil {
		return Entry{}, false, err
	}
	subject := j.subject(session)
	for range maxSeekSteps {
		m, err := j.stream.GetMsg(ctx, max(from, 1), jetstream.WithGetMsgSubject(subject))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return Entry{}, false, nil
		case err != nil:
			return Entry{}, false, fmt.Errorf("journal: seeking in a session: %w", err)
		}
		data, err := j.entryOf(ctx, m.Subject, m.Sequence, m.Header, m.Data)
		if err != nil {
			return Entry{}, false, fmt.Errorf("journal: seeking in a session: %w", err)
		}
		if data != nil {
			return Entry{Session: session, Seq: m.Sequence, Time: m.Time, Data: data}, true, nil
		}
		from = m.Sequence + 1
	}
	return Entry{}, false, fmt.Errorf("journal: seeking in a session: %d messages in a row past %d are not whole entries", maxSeekSteps, from)
}
