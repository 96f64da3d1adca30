package claude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
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
// A turn just finished may not be in the transcript yet (the CLI writes it
// every 100 ms): forking it then copies what the transcript has. A side
// chat made from a running turn (opts.Partial) gets the turn as far as the
// transcript has it.
func (b *Backend) Fork(ctx context.Context, opts plugins.ForkOptions) (string, error) {
	from, err := b.transcriptPath(opts.From)
	if err != nil {
		return "", err
	}
	into, err := b.transcriptPath(opts.Into)
	if err != nil {
		return "", err
	}
	f, err := os.Open(from)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("claude: session %s has no transcript in %s: %w", SessionID(opts.From.ID), opts.From.Dir, plugins.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("claude: open transcript: %w", err)
	}
	defer f.Close()

	id := SessionID(opts.Into.ID)
	tb := &turnBuilder{dir: opts.From.Dir}
	var out []byte
	found, done := false, false
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
		return "", fmt.Errorf("claude: read transcript %s: %w", from, err)
	}
	if !found && opts.Partial == nil {
		return "", fmt.Errorf("claude: the transcript of session %s has no turn %s: %w", SessionID(opts.From.ID), opts.TurnID, plugins.ErrNotFound)
	}
	if err := writeNew(into, out); err != nil {
		return "", err
	}
	return opts.Into.ID, nil
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
