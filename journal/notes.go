package journal

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Notes are small values the journal keeps beside the sessions, grouped
// in named sets, the last one set under a name winning: what a caller
// must find again after a restart, or on another host of a cluster, that
// is no session's (the host keeps the clients it remembers here). They
// live under subjects of their own, which no session read, Newest or
// mark sees: <prefix>.notes.<set>.<name in base64url>, one token more
// than any subject of a session's.

// MaxNoteBytes bounds a note: room for the HTTP API's kept answers
// (64 KiB of body and what describes it).
const MaxNoteBytes = 68 << 10

// maxNotes bounds what Notes reads of a set.
const maxNotes = 100_000

// noteSet is what a set's name may be: one subject token.
var noteSet = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Note is one note as read back.
type Note struct {
	Name string
	Data []byte
	Time time.Time // when the server stored it
}

func (j *Journal) noteSubject(set, name string) (string, error) {
	if !noteSet.MatchString(set) {
		return "", fmt.Errorf("journal: note set %q is not a lowercase name", set)
	}
	if name == "" || len(name) > MaxSessionBytes {
		return "", fmt.Errorf("journal: note name of %d bytes: want 1 to %d", len(name), MaxSessionBytes)
	}
	return j.cfg.Subject + ".notes." + set + "." + tokenEncoding.EncodeToString([]byte(name)), nil
}

// SetNote records data as the note name of set, in place of the last one.
func (j *Journal) SetNote(ctx context.Context, set, name string, data []byte) error {
	if err := j.check(); err != nil {
		return err
	}
	subject, err := j.noteSubject(set, name)
	if err != nil {
		return err
	}
	if len(data) > MaxNoteBytes {
		return fmt.Errorf("%w: a note of %d bytes, at most %d", ErrEntryTooLarge, len(data), MaxNoteBytes)
	}
	ack, err := j.publishOne(ctx, subject, data)
	if err != nil {
		return fmt.Errorf("journal: setting a note: %w", err)
	}
	// The older copies go; one the purge misses is older than the last,
	// which is the one read.
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(ack.Sequence)); err != nil {
		j.log.Warn("journal: purging a note's older copies", "err", err)
	}
	return nil
}

// DeleteNote drops the note name of set; dropping one not set is no error.
func (j *Journal) DeleteNote(ctx context.Context, set, name string) error {
	if err := j.check(); err != nil {
		return err
	}
	subject, err := j.noteSubject(set, name)
	if err != nil {
		return err
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return fmt.Errorf("journal: deleting a note: %w", err)
	}
	return nil
}

// DropNotes drops every note of set: a set named for a day goes whole
// once the day is past keeping.
func (j *Journal) DropNotes(ctx context.Context, set string) error {
	if err := j.check(); err != nil {
		return err
	}
	if !noteSet.MatchString(set) {
		return fmt.Errorf("journal: note set %q is not a lowercase name", set)
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.cfg.Subject+".notes."+set+".*")); err != nil {
		return fmt.Errorf("journal: dropping the notes of %s: %w", set, err)
	}
	return nil
}

// Notes returns every note of set, in no particular order.
func (j *Journal) Notes(ctx context.Context, set string) ([]Note, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	if !noteSet.MatchString(set) {
		return nil, fmt.Errorf("journal: note set %q is not a lowercase name", set)
	}
	prefix := j.cfg.Subject + ".notes." + set + "."
	info, err := j.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("journal: listing notes: %w", err)
	}
	if len(info.State.Subjects) > maxNotes {
		return nil, fmt.Errorf("journal: %d notes in set %s, more than %d", len(info.State.Subjects), set, maxNotes)
	}
	out := make([]Note, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		m, err := j.stream.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			continue // deleted meanwhile
		case err != nil:
			return nil, fmt.Errorf("journal: reading a note: %w", err)
		}
		name, err := tokenEncoding.DecodeString(strings.TrimPrefix(subject, prefix))
		if err != nil {
			continue // not one SetNote wrote
		}
		out = append(out, Note{Name: string(name), Data: m.Data, Time: m.Time})
	}
	return out, nil
}

// GetNote returns the note name of set, and false when none is set.
func (j *Journal) GetNote(ctx context.Context, set, name string) (Note, bool, error) {
	if err := j.check(); err != nil {
		return Note{}, false, err
	}
	subject, err := j.noteSubject(set, name)
	if err != nil {
		return Note{}, false, err
	}
	m, err := j.stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return Note{}, false, nil
	case err != nil:
		return Note{}, false, fmt.Errorf("journal: reading a note: %w", err)
	}
	return Note{Name: name, Data: m.Data, Time: m.Time}, true, nil
}

// RaiseNote records value as the note name of set, raised by who, if it is
// greater than the value the note holds (none: any value is), as one step
// no other writer can come between, and reports whether it did (or who
// had raised it to value already: a retry of a raise whose answer was
// lost): the hosts sharing a journal each try to raise one note to the
// time of a schedule's occurrence, and only one of them wins each
// occurrence. The note holds "<value> <who>".
func (j *Journal) RaiseNote(ctx context.Context, set, name string, value int64, who string) (bool, error) {
	if err := j.check(); err != nil {
		return false, err
	}
	subject, err := j.noteSubject(set, name)
	if err != nil {
		return false, err
	}
	for range 5 {
		var last uint64
		m, err := j.stream.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return false, fmt.Errorf("journal: reading a note: %w", err)
		default:
			held, by, _ := strings.Cut(string(m.Data), " ")
			if n, perr := strconv.ParseInt(held, 10, 64); perr == nil && n >= value {
				return n == value && by == who, nil
			}
			last = m.Sequence
		}
		msg := &nats.Msg{Subject: subject, Data: []byte(strconv.FormatInt(value, 10) + " " + who), Header: nats.Header{}}
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		ack, err := j.js.PublishMsg(ctx, msg)
		var api *jetstream.APIError
		switch {
		case errors.As(err, &api) && (api.ErrorCode == errWrongLastSequence || api.ErrorCode == errWrongLastSequenceInFlight):
			continue // another writer came first: look again
		case err != nil:
			return false, fmt.Errorf("journal: raising a note: %w", err)
		}
		if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(ack.Sequence)); err != nil {
			j.log.Warn("journal: purging a note's older copies", "err", err)
		}
		return true, nil
	}
	return false, fmt.Errorf("journal: raising a note: other writers kept coming first")
}
