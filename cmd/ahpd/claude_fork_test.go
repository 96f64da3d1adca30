package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/protocol"
)

// TestClaudeFork forks a two-turn Claude conversation at its first turn
// over the daemon's wire: the fork shows turn 1 only, and its next model
// call carries turn 1's messages and not turn 2's; the source chat is
// unchanged.
func TestClaudeFork(t *testing.T) {
	t.Parallel()
	f := newClaudeFixture(t)
	p := f.serve(t, "--log-level", "debug")
	c := connect(t, p, f.e.token(t), "c1")
	if a, ok := agentNamed(t, c, "claude"); !ok || a.Capabilities == nil || a.Capabilities.MultipleChats == nil ||
		a.Capabilities.MultipleChats.Fork == nil || !*a.Capabilities.MultipleChats.Fork {
		t.Errorf("claude's agent entry: %+v, want multipleChats.fork", a.Capabilities)
	}

	session, chat := f.newChat(t, c, "claudefork")
	t1, t2, t3 := newTurnID(), newTurnID(), newTurnID()
	f.mock.Enqueue(claudetest.Text("The code word is pelican."))
	if turn := sendTB(t, c, chat, t1, "remember a code word"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("first turn: %s", turnSummary(turn))
	}
	f.mock.Enqueue(claudetest.Text("The code word is heron now."))
	if turn := sendTB(t, c, chat, t2, "change the code word"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("second turn: %s", turnSummary(turn))
	}

	fork := strings.Replace(chat, "/default/", "/fork1/", 1)
	c.MustCall("createChat", map[string]any{"channel": session, "chat": fork,
		"source": map[string]any{"kind": "fork", "chat": chat, "turnId": t1}})
	fs := c.Subscribe(fork).State.(*protocol.ChatState)
	if len(fs.Turns) != 1 || fs.Turns[0].ID != t1 {
		t.Fatalf("the fork shows %d turns, want turn 1 alone", len(fs.Turns))
	}
	f.mock.Enqueue(claudetest.Text("It was pelican."))
	if turn := sendTB(t, c, fork, t3, "what was the code word?"); turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != "It was pelican." {
		t.Fatalf("the fork's turn: %s", turnSummary(turn))
	}
	reqs := f.mock.Requests()
	want := []string{"user: remember a code word", "assistant: The code word is pelican.", "user: what was the code word?"}
	if got := reqs[len(reqs)-1].Texts(); !slices.Equal(got, want) {
		t.Errorf("the fork's model call carried %q, want %q", got, want)
	}
	if cs := c.State(chat).(*protocol.ChatState); len(cs.Turns) != 2 {
		t.Errorf("the source shows %d turns after the fork's, want 2", len(cs.Turns))
	}
	c.Close()
	p.terminate()
	if got := f.cliPIDs(t, f.e.work); len(got) != 0 {
		t.Errorf("CLI processes %v outlived the daemon", got)
	}
}
