package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// hungDaemon is a daemon whose sessions each run a turn on an ACP agent
// that hangs: it answers nothing more, ignores session/cancel and the end
// of its stdin, and ends only when killed.
type hungDaemon struct {
	e      *env
	p      *proc
	c      *hosttest.Client
	bin    string // the agent's program: a copy of its own, so counting its processes counts this test's
	config string
	chats  []string
	first  []string // the id of each chat's first turn, which completed
	hung   []string // the id of each chat's hung turn
}

// startHungAgents starts a daemon with the given shutdown grace and n
// sessions, each with a completed turn and then one its agent hangs in.
func startHungAgents(tb testing.TB, n int, grace string) *hungDaemon {
	tb.Helper()
	e := newEnv(tb)
	d := &hungDaemon{e: e, bin: filepath.Join(e.root, "testagent")}
	data, err := os.ReadFile(testAgentBin)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(d.bin, data, 0o755); err != nil {
		tb.Fatal(err)
	}
	agentState := filepath.Join(e.root, "agent-state")
	if err := os.Mkdir(agentState, 0o700); err != nil {
		tb.Fatal(err)
	}
	// Registered before the daemon's own cleanup, so it runs after it: a
	// hung agent the daemon left behind must not outlive the test.
	tb.Cleanup(func() {
		for _, pid := range pidsOf(tb, d.bin) {
			tb.Errorf("agent pid %d outlived the daemon; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	d.config = writeConfig(tb, e, fmt.Sprintf(`
plugins:
  - {name: testagent, kind: acp, command: %s, env: {TESTAGENT_STATE: %s}}
`, d.bin, agentState))
	d.p = serveDaemon(tb, e, "--config", d.config, "--shutdown-grace", grace, "--log-level", "warn")
	d.c = connect(tb, d.p, e.token(tb), "c1")
	for i := range n {
		session := fmt.Sprintf("ahp-session:/hung%d", i)
		chat := protocol.DefaultChatURI(session)
		d.c.MustCall("createSession", map[string]any{"channel": session, "provider": "testagent", "workingDirectories": []string{"file://" + e.work}})
		d.c.Subscribe(session)
		d.c.Subscribe(chat)
		// ACP keeps a turn's id only as a message id, which must be a
		// UUID for the turn to come back under it.
		first, hung := newTurnID(), newTurnID()
		if turn := sendTB(tb, d.c, chat, first, "say hello"); turn.State != protocol.TurnStateComplete {
			tb.Fatalf("%s: the first turn: %s", chat, turnSummary(turn))
		}
		startTurn(d.c, chat, hung, "hang")
		d.c.WaitState(chat, "the agent of "+chat+" to hang", func(s protocol.ChannelState) bool {
			at := s.(*protocol.ChatState).ActiveTurn
			return at != nil && at.ID == hung && strings.Contains(text(at.ResponseParts), "hanging")
		})
		d.chats, d.first, d.hung = append(d.chats, chat), append(d.first, first), append(d.hung, hung)
	}
	waitRunning(tb, d.bin, n, "with every agent hung")
	return d
}

// hungExitTimeout bounds the wait for a daemon stopping hung agents. It
// only keeps a broken shutdown from hanging the test: how long a
// shutdown takes is BenchmarkShutdownHungAgents's to measure.
const hungExitTimeout = time.Minute

// TestShutdownStopsHungAgents stops a daemon whose six sessions each have
// an agent hung mid-turn. The daemon exits 0, no agent outlives it, each
// turn ends cancelled for the client watching it, and after a restart the
// sessions are there, with their conversations, and take new turns.
func TestShutdownStopsHungAgents(t *testing.T) {
	t.Parallel()
	d := startHungAgents(t, 6, "500ms")
	d.p.signal(syscall.SIGTERM)
	if code := d.p.wait(hungExitTimeout); code != 0 {
		t.Fatalf("exit status %d after SIGTERM", code)
	}
	waitRunning(t, d.bin, 0, "after the daemon stopped")

	// The client was told how each turn ended before its connection
	// closed.
	<-d.c.Done()
	for i, chat := range d.chats {
		cs := d.c.State(chat).(*protocol.ChatState)
		if cs.ActiveTurn != nil {
			t.Errorf("%s: turn %s still runs for the client", chat, cs.ActiveTurn.ID)
			continue
		}
		if last := cs.Turns[len(cs.Turns)-1]; last.ID != d.hung[i] || last.State != protocol.TurnStateCancelled {
			t.Errorf("%s: the hung turn ended as %s", chat, turnSummary(last))
		}
	}

	// A restart finds every session and its conversation, and the agents
	// start again.
	p := serveDaemon(t, d.e, "--config", d.config, "--log-level", "warn")
	c := connect(t, p, d.e.token(t), "c2")
	for i, chat := range d.chats {
		cs := c.Subscribe(chat).State.(*protocol.ChatState)
		if len(cs.Turns) == 0 || cs.Turns[0].ID != d.first[i] || !strings.Contains(text(cs.Turns[0].ResponseParts), "hello") {
			t.Errorf("%s after the restart: %d turns %+v", chat, len(cs.Turns), cs.Turns)
		}
		if turn := sendTB(t, c, chat, newTurnID(), "say again"); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != "again" {
			t.Errorf("%s: the turn after the restart: %s", chat, turnSummary(turn))
		}
	}
	waitRunning(t, d.bin, len(d.chats), "after the restart's turns")
	c.Close()
	p.terminate()
	waitRunning(t, d.bin, 0, "after the second daemon stopped")
}

// BenchmarkShutdownHungAgents measures how long a daemon with a 2s
// shutdown grace takes, from SIGTERM to its exit, to stop six sessions
// whose agents hang mid-turn, ignoring both session/cancel and the end of
// their stdin.
func BenchmarkShutdownHungAgents(b *testing.B) {
	const agents = 6
	var total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		d := startHungAgents(b, agents, "2s")
		b.StartTimer()
		start := time.Now()
		d.p.signal(syscall.SIGTERM)
		code := d.p.wait(hungExitTimeout)
		total += time.Since(start)
		n++
		b.StopTimer()
		if code != 0 {
			b.Fatalf("exit status %d", code)
		}
		waitRunning(b, d.bin, 0, "after the daemon stopped")
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(n), "s-shutdown")
}
