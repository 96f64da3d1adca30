package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// testAgentBin is the ACP test agent (plugins/acp/internal/testagent),
// built once by TestMain.
var testAgentBin string

func buildTestAgent(out string) error {
	cmd := exec.Command("go", "build", "-o", out, "github.com/ahpd/ahpd/plugins/acp/internal/testagent")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the ACP test agent: %v\n%s", err, output)
	}
	return nil
}

// processesOf counts the live processes running the program at path.
func processesOf(t testing.TB, path string) int {
	t.Helper()
	return len(pidsOf(t, path))
}

// pidsOf lists the live processes running the program at path.
func pidsOf(t testing.TB, path string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("counting processes needs /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path && running(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitRunning waits until n processes run the program at path.
func waitRunning(t testing.TB, path string, n int, why string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for processesOf(t, path) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d processes of %s, want %d", why, processesOf(t, path), filepath.Base(path), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func agentNamed(t *testing.T, c *hosttest.Client, provider string) (protocol.AgentInfo, bool) {
	t.Helper()
	for _, a := range c.State(protocol.RootURI).(*protocol.RootState).Agents {
		if a.Provider == provider {
			return a, true
		}
	}
	return protocol.AgentInfo{}, false
}

// TestACPPluginInTheDaemon runs an ACP agent declared in the config file:
// it is listed with its display name, runs turns in its own process, lets
// that process go when the session sleeps and starts exactly one again
// on wake, with the same conversation. Agents that cannot run are listed
// as unavailable and stop nothing.
func TestACPPluginInTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Each agent runs from a copy of its own, so counting processes
	// counts this test's only.
	bin := filepath.Join(e.root, "testagent")
	data, err := os.ReadFile(testAgentBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	agentState := filepath.Join(e.root, "agent-state")
	if err := os.Mkdir(agentState, 0o700); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, e, fmt.Sprintf(`
plugins:
  - name: testagent
    kind: acp
    displayName: Test Agent
    command: %s
    env: {TESTAGENT_STATE: %s}
  - {name: ghost, kind: acp, command: %s}
  - name: broken
    kind: acp
    command: %s
    env: {TESTAGENT_GARBAGE: exit}
`, bin, agentState, filepath.Join(e.root, "no-such-agent"), bin))
	p := serveDaemon(t, e, "--config", config, "--sleep-after-minutes", "0.005")
	c := connect(t, p, e.token(t), "c1")

	if a, ok := agentNamed(t, c, "testagent"); !ok || a.DisplayName != "Test Agent" {
		t.Errorf("testagent listed as %+v (%v)", a, ok)
	}
	if a, _ := agentNamed(t, c, "ghost"); !strings.HasPrefix(a.Description, "Unavailable: ") || !strings.Contains(a.Description, "no-such-agent") {
		t.Errorf("ghost, whose program is missing: %q", a.Description)
	}
	if a, _ := agentNamed(t, c, "broken"); strings.HasPrefix(a.Description, "Unavailable") {
		t.Errorf("broken is unavailable before it ever ran: %q", a.Description)
	}

	// A turn runs in one agent process.
	session := "ahp-session:/acp1"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "testagent", "workingDirectories": []string{"file://" + e.work}})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(session)
	c.Subscribe(chat)
	// ACP keeps a turn's id only as a message id, which must be a UUID,
	// as clients' turn ids are.
	const t1 = "0b5b3a8e-7f3c-4d55-9a43-0f8a3c2e9d11"
	if turn := send(t, c, chat, t1, "say hello from acp"); turn.State != protocol.TurnStateComplete || !strings.Contains(text(turn.ResponseParts), "hello from acp") {
		t.Fatalf("first turn: %s %q", turn.State, text(turn.ResponseParts))
	}
	waitRunning(t, bin, 1, "after the first turn")

	// Quiet and unwatched, it sleeps, and its process goes.
	c.Close()
	c = connect(t, p, e.token(t), "c2")
	waitStatus(t, c, session, "inactive")
	waitRunning(t, bin, 0, "asleep")

	// Woken by three clients at once: one process, the same conversation.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			w := connect(t, p, e.token(t), fmt.Sprintf("waker%d", i))
			defer w.Close()
			w.MustCall("ahpd/resumeSession", map[string]any{"channel": session})
		})
	}
	wg.Wait()
	c.Subscribe(session)
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if len(cs.Turns) != 1 || cs.Turns[0].ID != t1 || !strings.Contains(text(cs.Turns[0].ResponseParts), "hello from acp") {
		t.Errorf("after waking, the chat has %d turns (%+v)", len(cs.Turns), cs.Turns)
	}
	if turn := send(t, c, chat, "t2", "say hello again"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("turn after waking: %s", turn.State)
	}
	waitRunning(t, bin, 1, "after waking")

	// The agent dies mid-turn: the turn ends in an error that can be
	// resumed, which a new process, on the same conversation, continues;
	// the chat goes on.
	turn := send(t, c, chat, "t3", "say before\ncrash")
	if e := turn.ErrorPart(); turn.State != protocol.TurnStateError || e == nil || e.Resumable == nil || !*e.Resumable {
		t.Fatalf("a turn the agent died in: %s %+v", turn.State, e)
	}
	waitRunning(t, bin, 0, "after the crash")
	c.Dispatch(chat, &protocol.ChatTurnResumeAction{TurnID: "t3"})
	resumed := c.WaitState(chat, "t3 to go on and end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn == nil && cs.Turns[len(cs.Turns)-1].State == protocol.TurnStateComplete
	}).(*protocol.ChatState)
	if got := text(resumed.Turns[len(resumed.Turns)-1].ResponseParts); !strings.Contains(got, "before") || !strings.Contains(got, "continuing after 2 prompts") {
		t.Errorf("the resumed turn: %q", got)
	}
	if turn := send(t, c, chat, "t4", "say still here"); turn.State != protocol.TurnStateComplete {
		t.Errorf("the turn after: %s", turn.State)
	}
	waitRunning(t, bin, 1, "after the resume")

	// It dies again; this time the chat is put to sleep, which a dead
	// agent once refused ("work in hand"): its agent is stopped. The next message, not a
	// resume, starts a new process on the conversation.
	if turn := send(t, c, chat, "t5", "say again\ncrash"); turn.State != protocol.TurnStateError {
		t.Fatalf("the second crash: %s", turn.State)
	}
	c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	waitRunning(t, bin, 0, "after suspending")
	if turn := send(t, c, chat, "t6", "say after sleep"); turn.State != protocol.TurnStateComplete || !strings.Contains(text(turn.ResponseParts), "after sleep") {
		t.Errorf("the message after the crash: %s %q", turn.State, text(turn.ResponseParts))
	}
	if turn := send(t, c, chat, "t7", "crash"); turn.State != protocol.TurnStateError {
		t.Fatalf("the third crash: %s", turn.State)
	}
	if turn := send(t, c, chat, "t8", "say straight on"); turn.State != protocol.TurnStateComplete {
		t.Errorf("the message straight after a crash: %s %+v", turn.State, turn.ErrorPart())
	}
	waitRunning(t, bin, 1, "after the crashes")

	// An agent that dies at start fails the turn and is listed unavailable.
	bad := "ahp-session:/broken1"
	c.MustCall("createSession", map[string]any{"channel": bad, "provider": "broken", "workingDirectories": []string{"file://" + e.work}})
	c.Subscribe(bad)
	badChat := protocol.DefaultChatURI(bad)
	c.Subscribe(badChat)
	if turn := send(t, c, badChat, "t1", "say hi"); turn.State != protocol.TurnStateError {
		t.Errorf("a turn on an agent that exits at start: %s", turn.State)
	}
	c.WaitState(protocol.RootURI, "broken to be unavailable", func(s protocol.ChannelState) bool {
		for _, a := range s.(*protocol.RootState).Agents {
			if a.Provider == "broken" {
				return strings.HasPrefix(a.Description, "Unavailable: ")
			}
		}
		return false
	})
	c.Close()
	p.terminate()
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d", code)
	}
	waitRunning(t, bin, 0, "after the daemon stopped")
}

func waitStatus(t *testing.T, c *hosttest.Client, session, want string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		raw := c.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
		if strings.Contains(string(raw), `"`+want+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session status %s, want %s", raw, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPluginsConfigRefused checks the plugins list is checked before
// anything starts: exit status 2 and a message saying what is wrong.
func TestPluginsConfigRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"kind", "plugins: [{name: x, kind: lsp, command: x}]", `plugins[0] (x): kind must be acp or claude, not "lsp"`},
		{"command", "plugins: [{name: x, kind: acp}]", "plugins[0] (x): an acp plugin needs a command"},
		{"twice", "plugins: [{name: x, kind: acp, command: a}, {name: x, kind: acp, command: b}]", `plugins[1]: provider "x" is declared twice`},
		{"script", "plugins: [{name: script, kind: acp, command: a}]", `provider "script" is declared twice (script is built in)`},
		{"name", "plugins: [{name: 'Bad Name', kind: acp, command: a}]", `plugins[0]: name "Bad Name"`},
		{"claude name", "plugins: [{name: claudia, kind: claude}]", "the claude plugin is named claude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := launch(t, e, 0, "--config", writeConfig(t, e, tc.yaml), "--state-dir", e.state)
			if code := p.wait(exitTimeout); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if s := p.stderr.String(); !strings.Contains(s, tc.want) {
				t.Errorf("stderr = %q, want %q", s, tc.want)
			}
		})
	}
}
