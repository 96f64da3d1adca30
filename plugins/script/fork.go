package script

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/plugins"
)

var _ plugins.Forker = (*Backend)(nil)

// Fork copies the transcript of opts.From up to and including the turn
// opts.TurnID into a new transcript for opts.Into (plugins.Forker). The
// records keep their seq, so the copy's next turn numbers on from there
// and its tool call ids stay unique in it. A running turn a side chat is
// made from (opts.Partial) is recorded after them as it stands.
//
// The copy is written whole to a temporary file and renamed into place:
// a transcript is never seen half copied, and an existing one is never
// overwritten.
func (b *Backend) Fork(ctx context.Context, opts plugins.ForkOptions) (string, error) {
	from, err := b.transcriptPath(opts.From.ID)
	if err != nil {
		return "", err
	}
	into, err := b.transcriptPath(opts.Into.ID)
	if err != nil {
		return "", err
	}
	var kept []record
	found := false
	_, err = eachLine(ctx, from, func(line []byte) {
		if found {
			return
		}
		rec, err := decodeLine(line)
		if err != nil {
			return
		}
		// A turn continued is recorded again: the last record of it is
		// the turn, and the copy keeps that one.
		if n := len(kept); n > 0 && kept[n-1].Turn.ID == rec.Turn.ID {
			kept[n-1] = rec
		} else if rec.Turn.ID == opts.TurnID && opts.Partial != nil {
			return // the running turn is recorded below as it stands
		} else {
			if n := len(kept); n > 0 && kept[n-1].Turn.ID == opts.TurnID {
				found = true // the next turn began: the copy ends before it
				return
			}
			kept = append(kept, rec)
		}
	})
	if errors.Is(err, os.ErrNotExist) {
		err = nil // a conversation that has had no turn has an empty record
	}
	if err != nil {
		return "", err
	}
	switch {
	case opts.Partial != nil:
		seq := int64(1)
		if n := len(kept); n > 0 {
			seq = kept[n-1].Seq + 1
		}
		kept = append(kept, record{Seq: seq, Turn: *opts.Partial})
	case len(kept) == 0 || kept[len(kept)-1].Turn.ID != opts.TurnID:
		return "", fmt.Errorf("script: conversation %q has no turn %s: %w", opts.From.ID, opts.TurnID, plugins.ErrNotFound)
	}
	// A resume point belongs to the source's agent: the copy's turns
	// are finished as they are.
	for i := range kept {
		kept[i].Resume = nil
	}
	if err := writeTranscript(into, kept); err != nil {
		return "", err
	}
	return opts.Into.ID, nil
}

// writeTranscript writes a new transcript holding recs, synced, failing if
// one exists at path.
func writeTranscript(path string, recs []record) error {
	var data []byte
	for _, rec := range recs {
		line, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("script: encode turn %s: %w", rec.Turn.ID, err)
		}
		data = append(append(data, line...), '\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("script: transcript directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fork-*")
	if err != nil {
		return fmt.Errorf("script: fork transcript: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone already once linked into place
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename: a transcript already there is kept, and the
		// fork fails.
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("script: fork transcript %s: %w", path, err)
	}
	return nil
}
