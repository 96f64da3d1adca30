package acp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/acp"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// The agents the tests run, built by TestMain.
var (
	testAgent    string // internal/testagent
	exampleAgent string // the SDK's example agent
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "acp-test-agents-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testAgent = filepath.Join(dir, "testagent")
	exampleAgent = filepath.Join(dir, "example-agent")

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, pkg := range []struct{ out, pkg string }{
		{testAgent, "./internal/testagent"},
		{exampleAgent, "github.com/coder/acp-go-sdk/example/agent"},
	} {
		wg.Go(func() {
			out, err := exec.Command("go", "build", "-o", pkg.out, pkg.pkg).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("build %s: %v\n%s", pkg.pkg, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
			return 1
		}
	}
	return code
}

// fixture is a working directory and a backend running the test agent
// with some environment.
type fixture struct {
	dir   string // the session's working directory
	state string // the test agent's session store
	env   map[string]string
	log   *syncBuffer
	b     *acp.Backend
	// startTimeout is the backend's StartTimeout: testwait.Hang unless a
	// test changes it before making a backend.
	startTimeout time.Duration
}

func newFixture(t testing.TB, env map[string]string) *fixture {
	t.Helper()
	f := &fixture{
		dir:   t.TempDir(),
		state: t.TempDir(),
		env:   map[string]string{},
		log:   &syncBuffer{changed: make(chan struct{}, 1)},

		startTimeout: testwait.Hang,
	}
	f.env["TESTAGENT_STATE"] = f.state
	for k, v := range env {
		f.env[k] = v
	}
	f.b = f.backend(testAgent)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("backend log:\n%s", f.log.String())
		}
	})
	return f
}

// backend returns a new backend over the fixture's agent and directory,
// as after a restart.
func (f *fixture) backend(command string) *acp.Backend {
	logger := slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return acp.New(acp.Config{
		Name:         "test",
		DisplayName:  "Test agent",
		Command:      command,
		Env:          f.env,
		StartTimeout: f.startTimeout,
	}, logger)
}

func (f *fixture) conv(id string) plugins.Conversation {
	return plugins.Conversation{ID: id, Dir: f.dir}
}

func (f *fixture) path(name string) string { return filepath.Join(f.dir, name) }

// start starts an agent; it is closed when the test ends.
func (f *fixture) start(t testing.TB, b *acp.Backend, id string, resume bool) plugins.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	a, err := b.Start(ctx, plugins.StartOptions{Conversation: f.conv(id), Resume: resume})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// prompt runs one turn of text to its end.
func prompt(t *testing.T, a plugins.Agent, text string, turn *pluginstest.Turn) error {
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

// mustPrompt runs a turn that must complete.
func mustPrompt(t *testing.T, a plugins.Agent, text string) *pluginstest.Turn {
	t.Helper()
	turn := pluginstest.NewTurn("")
	if err := prompt(t, a, text, turn); err != nil {
		t.Fatalf("Prompt(%q): %v", text, err)
	}
	return turn
}

func userMessage(text string) protocol.Message {
	return protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
}

// syncBuffer is a log destination that outlives the test safely.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // told after each write, for waitFor
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.changed <- struct{}{}:
	default: // one told and not yet heard wakes the waiter all the same
	}
	return n, err
}

// waitFor waits, write by write, for the log to hold text: what the agent
// writes to its stderr comes to it.
func (b *syncBuffer) waitFor(t testing.TB, text string) {
	t.Helper()
	timeout := time.After(testwait.Hang)
	for !strings.Contains(b.String(), text) {
		select {
		case <-b.changed:
		case <-timeout:
			t.Fatalf("the log never said %q", text)
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
