package claude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

var _ plugins.Forker = (*Backend)(nil)

// Fork copies the CLI's transcript of opts.From, up to the end of the turn
// opts.TurnID, into a transcript of the new session (plugins.Forker), in
// the same project folder (the CLI resumes a session only from the folder
// it ran in): every line keeps its uuid and parentUuid, and its sessionId
// becomes the new session's. The chat's agent then resumes it with
// --resume, as any conversation of the CLI's.
//
// Why a copy rather than the CLI's own fork (--resume ID --fork-session,
// which 2.1.197 offers, with the hidden --resume-session-at UUID to stop
// at a message): the CLI forks only when a process starts on the fork, so
// the fork would not exist, nor could Turns read it, until the chat's first
// turn, and a restart in between would have to remember to make it; the
// CLI also chooses the fork's session id and gives its lines new uuids,
// losing the host's turn ids that Turns reads back. A copy exists as soon
// as the chat does, under the id the host chose, with the turn ids the
// source had; the transcript's format is the one Turns already reads.
//
// A turn just finished may not be in the transcript yet, or not whole (the
// CLI writes it every 100 ms): Fork waits, up to transcriptLag, for it to
// hold the turn as clients saw it end (opts.Seen), then copies what it
// has. A side chat made from a running turn (opts.Partial) gets the turn
// as far as the transcript has it.
func (b *Backend) Fork(ctx context.Context, opts plugins.ForkOptions) (string, error) {
	from, err := b.transcriptPath(opts.From)
	if err != nil {
		return "", err
	}
	into, err := b.transcriptPath(opts.Into)
	if err != nil {
		return "", err
	}
	// The CLI writes its transcript on a timer: a turn just ended may
	// not be in it yet, or not whole. Wait for it, a little: there is no
	// event to wait on but the file's own changes.
	deadline := time.Now().Add(transcriptLag)
	var out []byte
	for {
		var found, whole bool
		out, found, whole, err = copyThrough(ctx, from, opts, SessionID(opts.Into.ID))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if whole || opts.Partial != nil && err == nil {
			break
		}
		if opts.Seen == nil || time.Now().After(deadline) {
			if found {
				b.log.Warn("forking a turn the CLI's transcript may not hold whole", "session", SessionID(opts.From.ID), "turn", opts.TurnID)
				break
			}
			return "", fmt.Errorf("claude: the transcript of session %s in %s has no turn %s: %w", SessionID(opts.From.ID), opts.From.Dir, opts.TurnID, plugins.ErrNotFound)
		}
		t := time.NewTimer(transcriptPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		}
	}
	if err := writeNew(into, out); err != nil {
		return "", err
	}
	return opts.Into.ID, nil
}

// How long Fork waits for the CLI's transcript to hold the turn it forks,
// and how often it looks. The CLI writes it every 100 ms, and when a
// machine is busy later.
const (
	transcriptLag  = 5 * time.Second
	transcriptPoll = 25 * time.Millisecond
)

// copyThrough reads the transcript at from and returns its lines up to the
// end of the turn opts.TurnID, their sessionId set to id; whether it has
// the turn, and whether it has it whole: a later turn began, or it ends
// with the reply clients saw (opts.Seen).
func copyThrough(ctx context.Context, from string, opts plugins.ForkOptions, id string) (out []byte, found, whole bool, err error) {
	f, err := os.Open(from)
	if err != nil {
		return nil, false, false, err
	}
	defer f.Close()
	tb := &turnBuilder{dir: opts.From.Dir}
	done := false
	err = eachLine(ctx, f, func(line []byte) {
		if done {
			return
		}
		before := tb.cur
		tb.line(line)
		if tb.cur != nil && tb.cur != before { // the line starts a turn
			if found {
				done = true // the turn after the fork's: the copy ends before it
				return
			}
			found = tb.cur.id == opts.TurnID
		}
		if rewritten, ok := withSessionID(line, id); ok {
			out = append(append(out, rewritten...), '\n')
		}
	})
	if err != nil {
		return nil, false, false, fmt.Errorf("claude: read transcript %s: %w", from, err)
	}
	if done {
		return out, true, true, nil
	}
	tb.finish()
	if found && opts.Seen != nil {
		i := slices.IndexFunc(tb.turns, func(t protocol.Turn) bool { return t.ID == opts.TurnID })
		whole = i >= 0 && markdown(tb.turns[i].ResponseParts) == markdown(opts.Seen.ResponseParts)
	}
	return out, found, whole, nil
}

// markdown is the text of a turn's markdown parts.
func markdown(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(md.Content)
		}
	}
	return b.String()
}

// withSessionID returns a transcript line with its sessionId set to id; a
// line that is no JSON object (one the CLI was writing) is left out.
func withSessionID(line []byte, id string) ([]byte, bool) {
	var m map[string]jsontext.Value
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, false
	}
	if _, ok := m["sessionId"]; ok {
		v, err := json.Marshal(id)
		if err != nil {
			return nil, false
		}
		m["sessionId"] = v
	}
	out, err := json.Marshal(m, json.Deterministic(true))
	return out, err == nil
}

// writeNew writes data to a new file at path, synced, failing if one is
// there: a temporary file linked into place, so no transcript is seen half
// written or overwritten.
func writeNew(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("claude: transcript directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fork-*")
	if err != nil {
		return fmt.Errorf("claude: fork transcript: %w", err)
	}
	defer os.Remove(tmp.Name()) // linked into place by then, or garbage
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("claude: fork transcript %s: %w", path, err)
	}
	return nil
}
