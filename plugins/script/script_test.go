package script_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a backend over a temporary state directory and a
// conversation in a temporary working directory.
type fixture struct {
	backend    *script.Backend
	transcript string // the backend's transcript directory
	conv       plugins.Conversation
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "transcripts", "script")
	return &fixture{
		backend:    script.New(dir),
		transcript: dir,
		conv:       plugins.Conversation{ID: "conv-1", Dir: t.TempDir()},
	}
}

// start starts an agent with autoApprove set to approve ("" for none).
func (f *fixture) start(t *testing.T, approve string) plugins.Agent {
	t.Helper()
	opts := plugins.StartOptions{Conversation: f.conv}
	if approve != "" {
		opts.Config = protocol.Object{"autoApprove": jsontext.Value(`"` + approve + `"`)}
	}
	a, err := f.backend.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// prompt runs one turn of text, bounded so a hung turn fails the test.
func prompt(t *testing.T, a plugins.Agent, text string, turn plugins.Turn) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	return a.Prompt(ctx, userMessage(text), turn)
}

// ended waits for the error of a turn running on its own goroutine,
// failing the test if the turn never ends.
func ended(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(testwait.Hang):
		t.Fatalf("the turn did not end in %v", testwait.Hang)
		return nil
	}
}

func userMessage(text string) protocol.Message {
	return protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: "user"}}
}

// path returns the absolute path of name in the working directory.
func (f *fixture) path(name string) string { return filepath.Join(f.conv.Dir, name) }

func TestInfo(t *testing.T) {
	b := script.New(t.TempDir())
	info := b.Info()
	if info.Provider != "script" || info.DisplayName != "Script" || info.Description == "" {
		t.Errorf("Info = %+v", info)
	}
	if len(info.Models) != 1 || info.Models[0].ID != "script" || info.Models[0].Provider != "script" || info.Models[0].Name != "Script" {
		t.Errorf("Models = %+v", info.Models)
	}
	// Whether a step asks first is the session's permissions, which the
	// host offers for every backend.
	if props := b.ConfigProperties(); len(props) != 0 {
		t.Errorf("ConfigProperties = %+v, want none", props)
	}
	protocoltest.Validate(t, "AgentInfo", info)
}

func TestStartBadDirectory(t *testing.T) {
	f := newFixture(t)
	file := f.path("file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f.path("missing"), file, "relative/dir", ""} {
		_, err := f.backend.Start(context.Background(), plugins.StartOptions{
			Conversation: plugins.Conversation{ID: "c", Dir: dir},
		})
		if err == nil {
			t.Errorf("Start in %q: no error", dir)
		}
	}
}

func TestBadConversationIDs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"", "a/b", `a\b`, "..", "../x", ".hidden", "a\x00b"} {
		conv := plugins.Conversation{ID: id, Dir: f.conv.Dir}
		if _, err := f.backend.Start(ctx, plugins.StartOptions{Conversation: conv}); err == nil {
			t.Errorf("Start(%q): no error", id)
		}
		if _, err := f.backend.Turns(ctx, conv); err == nil || errors.Is(err, plugins.ErrNotFound) {
			t.Errorf("Turns(%q) = %v, want an id error", id, err)
		}
		if err := f.backend.Delete(ctx, conv); err == nil {
			t.Errorf("Delete(%q): no error", id)
		}
	}
	if _, err := os.Stat(f.transcript); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("transcript directory exists after refused ids: %v", err)
	}
}

func TestAgentID(t *testing.T) {
	f := newFixture(t)
	if got := f.start(t, "").ID(); got != f.conv.ID {
		t.Errorf("ID = %q, want %q", got, f.conv.ID)
	}
}

func TestPromptAfterClose(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := prompt(t, a, "say hi", pluginstest.NewTurn("")); err == nil {
		t.Error("Prompt after Close: no error")
	}
}

func TestConcurrentConversations(t *testing.T) {
	f := newFixture(t)
	const n = 8
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	errs := make(chan error, n)
	for i, dir := range dirs {
		go func() {
			conv := plugins.Conversation{ID: fmt.Sprintf("conv-%d", i), Dir: dir}
			a, err := f.backend.Start(context.Background(), plugins.StartOptions{Conversation: conv})
			if err != nil {
				errs <- err
				return
			}
			defer a.Close()
			turn := pluginstest.NewTurn("")
			turn.Confirms <- true // the write
			turn.Confirms <- true // the run
			errs <- a.Prompt(context.Background(), userMessage("say hello there\nwrite f.txt x\nrun true"), turn)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		turns, err := f.backend.Turns(context.Background(), plugins.Conversation{ID: fmt.Sprintf("conv-%d", i)})
		if err != nil || len(turns) != 1 {
			t.Errorf("conv-%d: %d turns, %v", i, len(turns), err)
		}
	}
}
