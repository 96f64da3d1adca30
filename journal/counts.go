package journal

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Counts returns how many entries each of the sessions holds, asking the
// server once whatever their number (at most MaxCountSessions); a session
// that holds none is left out.
func (j *Journal) Counts(ctx context.Context, sessions []string) (map[string]uint64, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	if len(sessions) > MaxCountSessions {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManySessions, len(sessions), MaxCountSessions)
	}
	want := make(map[string]string, len(sessions)) // subject -> session
	for _, s := range sessions {
		if err := checkSession(s); err != nil {
			return nil, err
		}
		want[j.subject(s)] = s
	}
	out := make(map[string]uint64, len(sessions))
	if len(want) == 0 {
		return out, nil
	}
	// One token after the prefix: the sessions' entries, not their floors
	// or marks.
	info, err := j.stream.Info(ctx, jetstream.WithSubjectFilter(j.cfg.Subject+".*"))
	if err != nil {
		return nil, fmt.Errorf("journal: counting entries: %w", err)
	}
	for subject, n := range info.State.Subjects {
		if s, ok := want[subject]; ok {
			out[s] = n
		}
	}
	return out, nil
}
