package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// A session's mark is one small value the journal keeps beside its
// entries, the last one set winning: a caller's note of where in the
// session's entries to start reading (the host's restart point, from
// which its state can be rebuilt without reading the session from its
// beginning). It lives on a subject of its own, so reads of the session's
// entries and Newest never see it, and Delete takes it with them.

// MaxMarkBytes bounds a mark.
const MaxMarkBytes = 1024

// markSubject is where the journal keeps the session's mark.
func (j *Journal) markSubject(session string) string {
	return j.subject(session) + ".mark"
}

// SetMark records data as the session's mark, in place of the last one.
func (j *Journal) SetMark(ctx context.Context, session string, data []byte) error {
	if err := j.check(); err != nil {
		return err
	}
	if err := checkSession(session); err != nil {
		return err
	}
	if len(data) > MaxMarkBytes {
		return fmt.Errorf("%w: a mark of %d bytes, at most %d", ErrEntryTooLarge, len(data), MaxMarkBytes)
	}
	subject := j.markSubject(session)
	if _, err := j.publishOne(ctx, subject, data); err != nil {
		return fmt.Errorf("journal: setting a session's mark: %w", err)
	}
	// The older marks go; a purge that fails leaves them to the stream's
	// age limit, and Mark reads the newest whatever is left.
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeKeep(1)); err != nil {
		j.log.Warn("journal: purging a session's older marks", "err", err)
	}
	return nil
}

// Mark returns the session's mark, and false when none is set (never, or
// it was dropped with its session or by the stream's age limit).
func (j *Journal) Mark(ctx context.Context, session string) ([]byte, bool, error) {
	if err := j.check(); err != nil {
		return nil, false, err
	}
	if err := checkSession(session); err != nil {
		return nil, false, err
	}
	m, err := j.stream.GetLastMsgForSubject(ctx, j.markSubject(session))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("journal: a session's mark: %w", err)
	}
	return m.Data, true, nil
}
