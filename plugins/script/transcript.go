package script

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/protocol"
)

// A transcript is a JSON Lines file, one record per finished turn, in the
// order the turns ended:
//
//	{"seq":1,"turn":{"id":"turn-1","startedAt":"...","duration":12.5,"message":{...},"responseParts":[...],"state":"complete"}}
//
// Appending whole lines keeps every earlier turn intact whatever happens
// to the process; a line cut short by a crash is skipped when reading.

// record is one transcript line.
type record struct {
	// Seq numbers the conversation's turns from 1; the turn's id and its
	// tool call ids derive from it.
	Seq  int64         `json:"seq"`
	Turn protocol.Turn `json:"turn"`
	// Resume is where a turn a crash step interrupted goes on from. A
	// turn continued is recorded again under the same seq: the last
	// record of a turn is the turn.
	Resume *resumePoint `json:"resume,omitempty"`
}

// resumePoint is where an interrupted turn's script goes on.
type resumePoint struct {
	Line  int `json:"line"`  // the line to run next, from 0
	Calls int `json:"calls"` // tool calls and questions so far, for their ids
}

// transcriptEnd is what an agent needs to know of an existing transcript
// to append to it.
type transcriptEnd struct {
	// seq is the highest turn number recorded.
	seq int64
	// unterminated is set when the last line has no newline, which is a
	// write cut short: the next record must start on a line of its own.
	unterminated bool
}

// appendRecord appends rec to the transcript at path as one line, synced
// to disk before it returns: a turn reported finished is on disk.
func appendRecord(path string, rec record, newlineFirst bool) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("script: encode turn %s: %w", rec.Turn.ID, err)
	}
	if newlineFirst {
		line = append([]byte{'\n'}, line...)
	}
	line = append(line, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("script: transcript directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("script: open transcript: %w", err)
	}
	// One Write call per line: with O_APPEND the line lands whole at the
	// end of the file.
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("script: write transcript %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("script: sync transcript %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("script: close transcript %s: %w", path, err)
	}
	return nil
}

// decodeLine decodes a transcript line. A line that is not a record is
// reported as an error, which readers treat as garbage to skip.
func decodeLine(line []byte) (record, error) {
	var rec record
	if err := json.Unmarshal(line, &rec); err != nil {
		return record{}, err
	}
	if rec.Seq <= 0 || rec.Turn.ID == "" {
		return record{}, errors.New("not a turn record")
	}
	// A turn recorded before protocol 0.9 kept its error beside its parts.
	if raw, ok := rec.Turn.Extra["error"]; ok {
		var info protocol.ErrorInfo
		if rec.Turn.ErrorPart() == nil && info.UnmarshalJSON(raw) == nil {
			rec.Turn.ResponseParts = append(rec.Turn.ResponseParts, &protocol.ErrorResponsePart{Error: info})
		}
		delete(rec.Turn.Extra, "error")
	}
	return rec, nil
}

// lastRecord returns the transcript's last record, nil if it has none.
func lastRecord(ctx context.Context, path string) (*record, error) {
	var last *record
	_, err := eachLine(ctx, path, func(line []byte) {
		if rec, err := decodeLine(line); err == nil {
			last = &rec
		}
	})
	return last, err
}

// readTranscript returns the turns recorded at path and how many lines it
// skipped because they did not decode. A missing file is an error
// satisfying errors.Is(err, os.ErrNotExist).
func readTranscript(ctx context.Context, path string) (turns []protocol.Turn, skipped int, err error) {
	turns = []protocol.Turn{}
	_, err = eachLine(ctx, path, func(line []byte) {
		rec, err := decodeLine(line)
		if err != nil {
			skipped++
			return
		}
		// A turn continued is recorded again: the later record is it.
		if n := len(turns); n > 0 && turns[n-1].ID == rec.Turn.ID {
			turns[n-1] = rec.Turn
			return
		}
		turns = append(turns, rec.Turn)
	})
	if err != nil {
		return nil, skipped, err
	}
	return turns, skipped, nil
}

// scanTranscript finds where the transcript at path ends.
func scanTranscript(path string) (transcriptEnd, error) {
	var end transcriptEnd
	unterminated, err := eachLine(context.Background(), path, func(line []byte) {
		if rec, err := decodeLine(line); err == nil {
			end.seq = max(end.seq, rec.Seq)
		}
	})
	end.unterminated = unterminated
	return end, err
}

// eachLine calls fn with every non-empty line of the file at path, and
// reports whether the last line lacks its newline. Lines may be of any
// length: a turn that wrote a large file carries it whole.
func eachLine(ctx context.Context, path string, fn func(line []byte)) (unterminated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, err
		}
		return false, fmt.Errorf("script: open transcript: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		line, err := r.ReadBytes('\n')
		unterminated = len(line) > 0 && line[len(line)-1] != '\n'
		if line = bytes.TrimSpace(line); len(line) > 0 {
			fn(line)
		}
		if err == io.EOF {
			return unterminated, nil
		}
		if err != nil {
			return false, fmt.Errorf("script: read transcript %s: %w", path, err)
		}
	}
}
