package claude

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf16"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Provider is the provider name the backend registers under.
const Provider = "claude"

// InstallHint says how to get the CLI, for errors that do not find it.
const InstallHint = "npm install -g @anthropic-ai/claude-code"

// Options configure a Backend.
type Options struct {
	// Command is the path of the claude CLI; "" finds "claude" on PATH
	// when an agent starts.
	Command string
	// Env is added to ahpd's own environment for the CLI process, later
	// entries winning. An entry without "=" removes that variable, so a
	// caller can keep, say, CLAUDE_CONFIG_DIR from reaching the CLI. HOME
	// and CLAUDE_CONFIG_DIR given here also decide where the backend
	// looks for transcripts, since that is where the CLI writes them.
	Env []string
	// Logger receives debug output (the CLI's stderr, lines the backend
	// does not understand); nil discards it.
	Logger *slog.Logger
	// Models are the models offered for a client to pick a turn's from
	// (Info's models); nil offers DefaultModels. An entry whose ID no
	// --model may carry is left out; one without a Name is named by its
	// ID. The ahpd config file does not set them yet.
	Models []Model
}

// Backend runs conversations in the Claude Code CLI. It holds no state of
// its own beyond its options: the CLI's transcripts are the record of
// every conversation.
type Backend struct {
	command string
	env     []string
	log     *slog.Logger
	models  []Model
}

var (
	_ plugins.Backend = (*Backend)(nil)
	_ plugins.Checker = (*Backend)(nil)
)

// New returns a backend running the CLI opts names.
func New(opts Options) *Backend {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		command: opts.Command,
		env:     append([]string(nil), opts.Env...),
		log:     log.With("backend", Provider),
		models:  append([]Model(nil), offeredModels(opts.Models)...),
	}
}

// Info describes the backend, with the models a client may pick a
// turn's from.
func (b *Backend) Info() protocol.AgentInfo {
	models := make([]protocol.SessionModelInfo, 0, len(b.models))
	for _, m := range b.models {
		models = append(models, protocol.SessionModelInfo{ID: m.ID, Provider: Provider, Name: m.Name})
	}
	return protocol.AgentInfo{
		Provider:    Provider,
		DisplayName: "Claude Code",
		Description: "Anthropic's Claude Code agent, run through its command-line interface: it reads and edits files and runs commands in the session's directory, asking before it changes anything.",
		Models:      models,
		// Fork copies a transcript (fork.go).
		Capabilities: plugins.ChatCapabilities(true, true),
	}
}

// Start starts the CLI for opts.Conversation. A conversation the CLI
// already has a transcript of is resumed (--resume); any other starts
// new under the conversation's id (--session-id). Start does not wait
// for the CLI to be ready: the first turn does.
func (b *Backend) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	conv := opts.Conversation
	if conv.ID == "" {
		return nil, errors.New("claude: empty conversation id")
	}
	if !filepath.IsAbs(conv.Dir) {
		return nil, fmt.Errorf("claude: working directory %q is not an absolute path", conv.Dir)
	}
	if info, err := os.Stat(conv.Dir); err != nil {
		return nil, fmt.Errorf("claude: working directory: %w", err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("claude: working directory %s is not a directory", conv.Dir)
	}
	command, err := b.findCommand()
	if err != nil {
		return nil, plugins.Unavailable(err)
	}
	id := SessionID(conv.ID)
	transcript, err := b.transcriptPath(conv)
	if err != nil {
		return nil, err
	}
	exists := fileExists(transcript)
	if !opts.Resume && exists {
		return nil, fmt.Errorf("claude: conversation %s already exists in %s", id, conv.Dir)
	}
	if opts.Resume && !exists {
		// The host resumes what it once started; a conversation that
		// never got a turn has no transcript yet and simply starts.
		b.log.Debug("no transcript to resume; starting anew", "session", id, "dir", conv.Dir)
	}
	a := newAgent(b, command, conv, id, transcript, opts.Config)
	if err := a.start(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// findCommand returns the CLI to run.
func (b *Backend) findCommand() (string, error) {
	if b.command != "" {
		return b.command, nil
	}
	path, err := exec.LookPath("claude")
	if err != nil {
		return "", fmt.Errorf("claude: the Claude Code CLI is not on PATH (install it with %s): %w", InstallHint, err)
	}
	return path, nil
}

// Check reports whether the CLI can be found, so a host lists a machine
// without it as unavailable before anybody tries.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.findCommand()
	if err == nil && b.command != "" {
		if _, err = exec.LookPath(b.command); err != nil {
			err = fmt.Errorf("claude: %w (install the Claude Code CLI with %s)", err, InstallHint)
		}
	}
	return err
}

// Turns reads conv's turns back from the CLI's transcript.
func (b *Backend) Turns(ctx context.Context, conv plugins.Conversation) ([]protocol.Turn, error) {
	path, err := b.transcriptPath(conv)
	if err != nil {
		return nil, err
	}
	turns, err := readTranscript(ctx, path, conv.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("claude: conversation %q: %w", conv.ID, plugins.ErrNotFound)
	}
	return turns, err
}

// Delete removes conv's transcript, and nothing else the CLI keeps.
func (b *Backend) Delete(ctx context.Context, conv plugins.Conversation) error {
	path, err := b.transcriptPath(conv)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("claude: delete conversation %q: %w", conv.ID, err)
	}
	return nil
}

// getenv returns the value the CLI process sees for key.
func (b *Backend) getenv(key string) string {
	for i := len(b.env) - 1; i >= 0; i-- {
		k, v, hasValue := strings.Cut(b.env[i], "=")
		if k == key {
			if !hasValue {
				return ""
			}
			return v
		}
	}
	return os.Getenv(key)
}

// environ returns the CLI process's environment: ours with Options.Env
// applied, and PWD naming dir, so that a CLI reading PWD agrees with its
// real working directory.
func (b *Backend) environ(dir string) []string {
	drop := map[string]bool{"PWD": true}
	var extra []string
	for _, kv := range b.env {
		k, _, hasValue := strings.Cut(kv, "=")
		drop[k] = true
		if hasValue {
			extra = append(extra, kv)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	// exec keeps the last of duplicate keys, which are Options.Env's.
	env = append(env, extra...)
	return append(env, "PWD="+dir)
}

// configDir returns the CLI's configuration directory, as the CLI finds
// it: $CLAUDE_CONFIG_DIR, or .claude in its home directory.
func (b *Backend) configDir() (string, error) {
	if dir := b.getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return dir, nil
	}
	home := b.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("claude: no home directory for the CLI's transcripts: %w", err)
		}
	}
	return filepath.Join(home, ".claude"), nil
}

// transcriptPath returns where the CLI keeps conv's transcript.
func (b *Backend) transcriptPath(conv plugins.Conversation) (string, error) {
	if conv.ID == "" {
		return "", errors.New("claude: empty conversation id")
	}
	config, err := b.configDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(config, "projects", projectDirName(conv.Dir), SessionID(conv.ID)+".jsonl"), nil
}

// maxProjectName is the length beyond which the CLI shortens a project
// directory name and adds a hash of the path.
const maxProjectName = 200

// projectDirName returns the name of the directory the CLI keeps the
// transcripts of sessions run in dir under. The CLI names it after its
// working directory as the system reports it, links resolved, with
// every UTF-16 code unit that is not an ASCII letter or digit replaced by
// '-'.
func projectDirName(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	units := utf16.Encode([]rune(dir))
	var b strings.Builder
	for _, u := range units {
		if u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9') {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) <= maxProjectName {
		return name
	}
	// The CLI's own string hash (Java's), over UTF-16 code units, in
	// base 36.
	var h int32
	for _, u := range units {
		h = h*31 + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return name[:maxProjectName] + "-" + formatBase36(abs)
}

func formatBase36(n int64) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	if n == 0 {
		return "0"
	}
	var buf [16]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = digits[n%36]
		n /= 36
	}
	return string(buf[i:])
}

// SessionID returns the CLI session id of a conversation id: the id
// itself when it is a UUID, as the CLI requires, and otherwise a UUID
// derived from it (a name-based, version 5 style UUID), so the same
// conversation id always names the same session.
func SessionID(id string) string {
	if isUUID(id) {
		return strings.ToLower(id)
	}
	sum := sha1.Sum([]byte("ahpd/claude\x00" + id))
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return formatUUID(u)
}

func formatUUID(u []byte) string {
	s := hex.EncodeToString(u)
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// isUUID reports whether s is a UUID in its canonical text form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}
