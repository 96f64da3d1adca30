package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ahpd/ahpd/journal"
)

// Answers is where the answers to Idempotency-Key requests are kept so
// that a restart of the host, or another host of its cluster, finds them:
// notes in sets named for the day they were kept on, so that a day past
// keeping goes whole, unread. *journal.Journal is one.
type Answers interface {
	SetNote(ctx context.Context, set, name string, data []byte) error
	GetNote(ctx context.Context, set, name string) (journal.Note, bool, error)
	DropNotes(ctx context.Context, set string) error
}

const (
	// answerTimeout bounds one read or write of a kept answer.
	answerTimeout = 5 * time.Second
	// maxKeptADay bounds the answers one host keeps durably a day; past
	// it they are kept in memory only (and the host says so, once).
	maxKeptADay = 10_000
	// sweepDays is how many days before the one past keeping each sweep
	// drops too, for a host that was down for some.
	sweepDays = 7
)

// keptAnswer is how an answer is kept: this, as JSON, a newline, and the
// body as it was sent.
type keptAnswer struct {
	Fingerprint string      `json:"f"`
	At          time.Time   `json:"at"`
	Status      int         `json:"s"`
	Header      http.Header `json:"h,omitempty"`
	TooLarge    bool        `json:"large,omitempty"`
}

// answerSet is the note set of the answers kept on day t (UTC).
func answerSet(t time.Time) string { return "answers-" + t.UTC().Format("20060102") }

// answerName is the name an answer is kept under: a digest, so that
// neither the person nor their key is written out.
func answerName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// encodeAnswer is the note e is kept as; an answer whose body does not
// fit in a note is kept as answered, without it.
func encodeAnswer(e *keyed) []byte {
	head := keptAnswer{Fingerprint: hex.EncodeToString(e.fingerprint[:]), At: e.at, Status: e.status, Header: e.header, TooLarge: e.tooLarge}
	line, _ := json.Marshal(head)
	if !e.tooLarge && len(line)+1+len(e.body) > journal.MaxNoteBytes {
		head.TooLarge = true
		line, _ = json.Marshal(head)
	}
	out := append(line, '\n')
	if !head.TooLarge {
		out = append(out, e.body...)
	}
	return out
}

// decodeAnswer reads a note encodeAnswer made.
func decodeAnswer(id string, data []byte) (*keyed, error) {
	line, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return nil, errors.New("a kept answer without its head")
	}
	var head keptAnswer
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("a kept answer's head: %w", err)
	}
	e := &keyed{id: id, at: head.At, done: true, status: head.Status, header: head.Header, tooLarge: head.TooLarge}
	if n, err := hex.Decode(e.fingerprint[:], []byte(head.Fingerprint)); err != nil || n != sha256.Size {
		return nil, errors.New("a kept answer's fingerprint is unreadable")
	}
	if !e.tooLarge {
		e.body = bytes.Clone(body)
	}
	return e, nil
}

// recall finds the answer kept under id on another day of this host or
// by another host: nil when there is none within keyTTL.
func (k *keys) recall(ctx context.Context, id string) (*keyed, error) {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	now := k.now()
	name := answerName(id)
	sets := []string{answerSet(now)}
	if y := answerSet(now.Add(-keyTTL)); y != sets[0] {
		sets = append(sets, y)
	}
	for _, set := range sets {
		n, ok, err := k.store.GetNote(ctx, set, name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		e, err := decodeAnswer(id, n.Data)
		if err != nil {
			k.log.Warn("a kept answer to an Idempotency-Key is unreadable: the request is served as new", "err", err)
			return nil, nil
		}
		if now.Sub(e.at) >= keyTTL {
			return nil, nil
		}
		return e, nil
	}
	return nil, nil
}

// keep writes e's answer where recall finds it, and once a day drops the
// sets past keeping. A failure is logged: the answer is still kept in
// memory.
func (k *keys) keep(e *keyed) {
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	set := answerSet(e.at)
	k.mu.Lock()
	newDay := set != k.day
	if newDay {
		k.day, k.keptToday, k.full = set, 0, false
	}
	over := k.keptToday >= maxKeptADay
	warn := over && !k.full
	k.full = k.full || over
	if !over {
		k.keptToday++
	}
	k.mu.Unlock()
	if newDay {
		k.sweep(ctx, e.at)
	}
	if warn {
		k.log.Warn("kept the most answers to Idempotency-Keys a day: the rest today are kept until this host stops", "limit", maxKeptADay)
	}
	if over {
		return
	}
	if err := k.store.SetNote(ctx, set, answerName(e.id), encodeAnswer(e)); err != nil {
		k.log.Warn("could not keep an answer to an Idempotency-Key: it is kept until this host stops", "err", err)
	}
}

// sweep drops the sets of the days past keeping as of now: two days back
// (an answer is recalled from today's set and yesterday's) and the
// sweepDays before.
func (k *keys) sweep(ctx context.Context, now time.Time) {
	for d := 2; d < 2+sweepDays; d++ {
		if err := k.store.DropNotes(ctx, answerSet(now.AddDate(0, 0, -d))); err != nil {
			k.log.Warn("could not drop the answers to Idempotency-Keys past keeping", "err", err)
			return
		}
	}
}
