// Package script is ahpd's built-in deterministic backend. It reads each
// user message as a tiny script, one step a line ("say hi", "write a.txt
// hello", "run go test ./..."), and performs the steps for real: it
// writes files, runs commands and asks questions through the same Turn
// every other backend reports to. That makes it the backend tests and
// demos drive the whole host with, without a model behind it.
package script

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Provider is the provider name the script backend registers under.
const Provider = "script"

// Backend is the script backend. It keeps no state in memory besides its
// transcript directory: every conversation's record lives in its
// transcript file, so one Backend serves any number of conversations at
// once and a new Backend over the same directory sees them all.
type Backend struct {
	dir string
}

var _ plugins.Backend = (*Backend)(nil)

// New returns a script backend keeping its transcripts in transcriptDir,
// which is created on the first write.
func New(transcriptDir string) *Backend {
	return &Backend{dir: transcriptDir}
}

// Info describes the backend and its single model.
func (b *Backend) Info() protocol.AgentInfo {
	return protocol.AgentInfo{
		Provider:    Provider,
		DisplayName: "Script",
		Description: "Runs each message as a small script of steps (say, write, run, ask, ...); deterministic, for tests and demos.",
		Models: []protocol.SessionModelInfo{
			{ID: "script", Provider: Provider, Name: "Script"},
		},
		// Fork copies a transcript (fork.go).
		Capabilities: plugins.ChatCapabilities(true, true),
	}
}

// ConfigProperties offers nothing of the backend's own: whether a write
// or a command asks first is the session's permissions, which the host
// offers for every backend (plugins.ConfigPermissions, and the older
// autoApprove: "allow" is bypass).
func (b *Backend) ConfigProperties() []plugins.Property { return nil }

// Start starts an agent for opts.Conversation. A new and a resumed
// conversation start alike: the agent appends its turns to the
// conversation's transcript, which is created on the first turn.
func (b *Backend) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	conv := opts.Conversation
	path, err := b.transcriptPath(conv.ID)
	if err != nil {
		return nil, err
	}
	if err := checkWorkDir(conv.Dir); err != nil {
		return nil, err
	}
	// Turn ids must stay unique across restarts, or a host merging the
	// turns it holds with those read back would drop some: continue the
	// numbering where the transcript ends.
	last, err := scanTranscript(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("script: start conversation %q: %w", conv.ID, err)
	}
	return newAgent(conv, path, opts.Config, last), nil
}

// Turns reads the finished turns of conv from its transcript. Lines that
// do not decode, such as one cut short by a crash, are skipped.
func (b *Backend) Turns(ctx context.Context, conv plugins.Conversation) ([]protocol.Turn, error) {
	path, err := b.transcriptPath(conv.ID)
	if err != nil {
		return nil, err
	}
	turns, _, err := readTranscript(ctx, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("script: conversation %q: %w", conv.ID, plugins.ErrNotFound)
	}
	return turns, err
}

// Delete removes conv's transcript.
func (b *Backend) Delete(ctx context.Context, conv plugins.Conversation) error {
	path, err := b.transcriptPath(conv.ID)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("script: delete conversation %q: %w", conv.ID, err)
	}
	return nil
}

// transcriptPath returns the transcript file of the conversation id. The
// id becomes a file name, so anything that could name another file is
// refused.
func (b *Backend) transcriptPath(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return filepath.Join(b.dir, id+".jsonl"), nil
}

func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("script: empty conversation id")
	// Without a separator and a leading dot, the id names a file of the
	// folder and no other: "a..b" is a name like any.
	case strings.ContainsAny(id, `/\`+"\x00"), strings.HasPrefix(id, "."):
		return fmt.Errorf("script: conversation id %q cannot name a transcript file", id)
	}
	return nil
}

// checkWorkDir makes sure dir is an existing directory, so a bad session
// fails when it starts rather than at its first command.
func checkWorkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("script: working directory %q is not an absolute path", dir)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("script: working directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("script: working directory %s is not a directory", dir)
	}
	return nil
}
