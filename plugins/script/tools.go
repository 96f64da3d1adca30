package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/agentproc"
	"github.com/ahpd/ahpd/protocol"
)

// maxOutput bounds the output of a run step kept as its result.
const maxOutput = 64 << 10

// write writes content to path, a file in the working directory, once
// the session's permissions or a person allow it.
func (r *run) write(ctx context.Context, path, content string) error {
	input, err := json.Marshal(struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}{path, content})
	if err != nil {
		return fmt.Errorf("encode write input: %w", err)
	}
	call := plugins.ToolCall{
		ID:          r.nextID("tool"),
		Name:        "write",
		DisplayName: "Write",
		Invocation:  protocol.Markdown(fmt.Sprintf("Write `%s`", path)),
		Input:       string(input),
		Kind:        plugins.KindEdit,
	}

	target, err := resolveInside(r.agent.conv.Dir, path)
	// The policy decides on the file the step writes: the path cleaned
	// as writeFile takes it.
	call.Paths = []string{target}
	if err != nil {
		// Refused without asking: no answer would make this write right.
		r.turn.ToolStart(call)
		r.turn.ToolRunning(call.ID, call.Invocation, call.Input)
		r.turn.ToolDone(call.ID, protocol.ToolCallResult{
			PastTenseMessage: protocol.Markdown(fmt.Sprintf("Refused to write `%s`", path)),
			Error:            &protocol.ToolError{Message: err.Error()},
		})
		return nil
	}

	ok, d, err := plugins.Confirm(ctx, r.turn, r.agent.policy(), call)
	if err != nil {
		return err
	}
	if !ok {
		// The host ends a denied call itself; the script goes on. The
		// turn says what became of the write in its text: a turn of
		// nothing but a denied call reads as an empty answer, and the
		// transcript keeps the text for a reload.
		why := "the write was denied."
		if d.Verdict == plugins.Deny {
			why = fmt.Sprintf("the session's permissions deny it (%s).", d.Rule)
		}
		r.turn.Text(fmt.Sprintf("Skipped writing `%s`: %s\n\n", path, why))
		return nil
	}

	before := plugins.ReadFileVersion(target)
	if err := writeFile(target, content); err != nil {
		r.turn.ToolDone(call.ID, protocol.ToolCallResult{
			PastTenseMessage: protocol.Markdown(fmt.Sprintf("Failed to write `%s`", path)),
			Error:            &protocol.ToolError{Message: err.Error()},
		})
		return nil
	}
	// The result says what was written, so that VS Code shows the edit
	// and the host counts it where it has no repository to diff.
	r.turn.ToolDone(call.ID, protocol.ToolCallResult{
		Success:          true,
		PastTenseMessage: protocol.Markdown(fmt.Sprintf("Wrote `%s`", path)),
		Content:          []protocol.ToolResultContent{plugins.FileEdit(target, before, plugins.VersionOf([]byte(content)))},
	})
	return nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// resolveInside returns the file path names, relative to dir or absolute,
// when it lies inside dir, and an error saying why not otherwise. Links
// count where they lead: a link inside dir to a place outside it is
// outside.
func resolveInside(dir, path string) (string, error) {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	target := path
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	target = filepath.Clean(target)
	if !insideLinks(filepath.Clean(dir), realDir, target, 0) {
		return "", fmt.Errorf("%s is outside the working directory %s", path, dir)
	}
	return target, nil
}

// maxLinks bounds the links followed to find where a write lands, as the
// kernel bounds them.
const maxLinks = 40

// insideLinks reports whether writing the clean absolute path target
// lands strictly inside the directory dir, whose real path is realDir.
func insideLinks(dir, realDir, target string, links int) bool {
	if !strictlyInside(dir, realDir, target) {
		return false
	}
	// The nearest ancestor that exists decides where the missing rest
	// will be created; nothing below it can be a link yet.
	parent := filepath.Dir(target)
	for {
		if _, err := os.Lstat(parent); err == nil {
			break
		}
		up := filepath.Dir(parent)
		if up == parent {
			break
		}
		parent = up
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil || !within(realDir, realParent) {
		return false
	}
	// The file itself may be a link, even one to nothing yet, and
	// writing follows it.
	info, err := os.Lstat(target)
	if err != nil || info.Mode()&os.ModeSymlink == 0 {
		return true
	}
	if links >= maxLinks {
		return false
	}
	dest, err := os.Readlink(target)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(realParent, dest)
	}
	return insideLinks(dir, realDir, filepath.Clean(dest), links+1)
}

// strictlyInside reports whether path lies below dir, named either by
// its path or its real path.
func strictlyInside(dir, realDir, path string) bool {
	return path != dir && path != realDir && (within(dir, path) || within(realDir, path))
}

// within reports whether path is dir or lies below it; both are clean.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// stopGrace is how long what a command leaves running, or a cancelled
// command, has between SIGTERM and SIGKILL. A variable for tests only
// (SetStopGrace), which need a command's trap to run however slow the
// machine.
var stopGrace = time.Second

// run runs command with sh in the working directory, once the session's
// permissions or a person allow it. A command that fails is a failed
// tool call; the turn goes on. The command runs in a
// process group of its own, which is stopped when the command ends or
// the turn is cancelled: what it started in the background ends with the
// step.
func (r *run) run(ctx context.Context, command string) error {
	call := plugins.ToolCall{
		ID:          r.nextID("tool"),
		Name:        "run",
		DisplayName: "Run",
		Invocation:  protocol.Markdown(fmt.Sprintf("Run `%s`", command)),
		Kind:        plugins.KindExecute,
	}
	if input, err := json.Marshal(struct {
		Command string `json:"command"`
	}{command}); err == nil {
		call.Input = string(input)
	}
	ok, _, err := plugins.Confirm(ctx, r.turn, r.agent.policy(), call)
	if err != nil {
		return err
	}
	if !ok {
		// The host ends a denied call itself; the script goes on.
		return nil
	}

	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = r.agent.conv.Dir
	out := &limitedBuffer{max: maxOutput}
	if !r.agent.commandStarts() {
		return errClosed
	}
	err = agentproc.Run(ctx, cmd, out, stopGrace)
	r.agent.commandEnded()
	if ctx.Err() != nil {
		// The turn is cancelled; the host cancels the open call with it.
		return ctx.Err()
	}

	result := protocol.ToolCallResult{
		Success:          err == nil,
		PastTenseMessage: protocol.Markdown(fmt.Sprintf("Ran `%s`", command)),
		Content:          []protocol.ToolResultContent{&protocol.ToolResultTextContent{Text: out.String()}},
	}
	if err != nil {
		msg := err.Error()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			msg = "cannot run the command: " + msg
		}
		result.Error = &protocol.ToolError{Message: msg}
	}
	r.turn.ToolDone(call.ID, result)
	return nil
}

// limitedBuffer keeps the first max bytes written to it and counts the
// rest. exec calls Write from one goroutine at a time when stdout and
// stderr are the same writer.
type limitedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	keep := min(len(p), b.max-b.buf.Len())
	b.buf.Write(p[:keep])
	b.dropped += len(p) - keep
	return len(p), nil
}

// String returns the output kept, valid UTF-8 for the wire, with a note
// when some was dropped.
func (b *limitedBuffer) String() string {
	s := strings.ToValidUTF8(b.buf.String(), "\uFFFD")
	if b.dropped > 0 {
		s += fmt.Sprintf("\n[output truncated: %d more bytes]", b.dropped)
	}
	return s
}
