//go:build unix

package acp_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahpd/ahpd/chats/chatstest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// The two kinds of agent a chat survives the death of: one that loads
// its sessions back, and one that cannot.
var deathCaps = []struct {
	name, caps string
	load       bool
}{
	{"with loadSession", "load", true},
	{"without loadSession", "none", false},
}

// chatPID runs a first turn that has the agent say its pid, and returns
// the pid.
func chatPID(t *testing.T, o *chatstest.Owner) int {
	t.Helper()
	o.Send(t, "t1", "pid")
	turn := o.WaitEnded(t, "t1")
	pid, err := strconv.Atoi(strings.TrimPrefix(chatstest.Response(turn.ResponseParts), "pid "))
	if turn.State != protocol.TurnStateComplete || err != nil {
		t.Fatalf("t1 ended %s: %+v", turn.State, turn.ResponseParts)
	}
	return pid
}

// checkCarriedOn checks the turn after a death: a new agent took it and
// completed it, having loaded the conversation if it can (it knows the
// first turn), or saying in a note that it remembers nothing.
func checkCarriedOn(t *testing.T, o *chatstest.Owner, turnID string, load bool, conv string) {
	t.Helper()
	turn := o.WaitEnded(t, turnID)
	if turn.State != protocol.TurnStateComplete {
		t.Fatalf("%s ended %s: %+v", turnID, turn.State, turn.ResponseParts)
	}
	got := chatstest.Response(turn.ResponseParts)
	if o.Starts() != 2 {
		t.Errorf("%d agents started, want 2", o.Starts())
	}
	if load {
		if got != "history: 1" || chatstest.HasNote(turn) || o.Chat().ConversationID() != conv {
			t.Errorf("%s: %q in conversation %s, want the new agent to have loaded %s, which had 1 prompt", turnID, got, o.Chat().ConversationID(), conv)
		}
		return
	}
	if !chatstest.HasNote(turn) || !strings.HasSuffix(got, "history: 0") || o.Chat().ConversationID() == conv {
		t.Errorf("%s: %q in conversation %s (was %s), want a new conversation and the restart note", turnID, got, o.Chat().ConversationID(), conv)
	}
}

// TestChatSurvivesAgentDeath has the agent die in the ways agents die,
// mid-turn and between turns: the turn it dies in ends with an error
// saying how, the process is gone, and the next message in the chat
// starts a new agent that completes it.
func TestChatSurvivesAgentDeath(t *testing.T) {
	t.Parallel()
	deaths := []struct {
		name  string
		step  string                      // the dying turn's prompt; "" dies between turns
		kill  func(t *testing.T, pid int) // what the test does once the turn has said "waiting"
		cause string                      // what the turn's error says
	}{
		{name: "exit 1", step: "say dying\nexit 1", cause: "exit status 1"},
		{name: "SIGKILL", step: "wait", kill: sigkill, cause: "signal: killed"},
		{name: "a 12 MB line", step: "bigline 12000000", cause: "line of more than 8 MiB"},
		{name: "SIGKILL between turns", kill: sigkill},
	}
	for _, c := range deathCaps {
		for _, d := range deaths {
			t.Run(c.name+"/"+d.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, map[string]string{"TESTAGENT_CAPS": c.caps})
				o := chatstest.New(t, f.b, f.dir)
				pid := chatPID(t, o)
				conv := o.Chat().ConversationID()
				if got := o.Chat().CanLetGo(); got != c.load {
					t.Errorf("CanLetGo() = %v with the agent alive", got)
				}
				if d.step == "" {
					d.kill(t, pid)
					// The chat hears of it as the agent's end.
					<-o.Agent(0).(plugins.Mortal).Dead()
					if !o.Chat().CanLetGo() {
						t.Error("a chat whose agent died cannot be let go")
					}
				} else {
					o.Send(t, "t2", d.step)
					if d.kill != nil {
						o.WaitText(t, "t2", "waiting")
						d.kill(t, pid)
					}
					checkDeathTurn(t, o, c.load, d.cause)
				}
				if !pluginstest.ProcessGone(pid) {
					t.Errorf("the dead agent (pid %d) runs on", pid)
				}
				o.Send(t, "t3", "history")
				checkCarriedOn(t, o, "t3", c.load, conv)
			})
		}
	}
}

// checkDeathTurn checks the turn an agent died in ended with an error
// naming the cause: one the client may resume when the agent loads its
// sessions, and otherwise one telling the next message starts it again.
func checkDeathTurn(t *testing.T, o *chatstest.Owner, load bool, cause string) {
	t.Helper()
	turn := o.WaitEnded(t, "t2")
	e, ok := chatstest.ErrorOf(turn)
	if turn.State != protocol.TurnStateError || !ok || !strings.Contains(e.Message, cause) {
		t.Fatalf("t2 ended %s with %+v, want an error saying %q", turn.State, e, cause)
	}
	t.Logf("the turn's error: %s", e.Message)
	if len(e.Message) > 4<<10 {
		t.Errorf("the error is %d bytes long", len(e.Message))
	}
	wantType := "agentError"
	if load {
		wantType = "agentInterrupted"
	} else if !strings.Contains(e.Message, "the next message starts it again") {
		t.Errorf("the error does not say the next message starts the agent again: %s", e.Message)
	}
	if e.ErrorType != wantType {
		t.Errorf("error type %s, want %s", e.ErrorType, wantType)
	}
	if o.Chat().HasAgent() {
		t.Error("the chat keeps the dead agent")
	}
}

func sigkill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// TestMessageAfterCancellingHungTurn cancels a turn of an agent that
// ignores session/cancel: it is killed after the cancel grace, and the
// message sent right after the cancel starts in a new agent and
// completes. The hung agent's process is gone.
func TestMessageAfterCancellingHungTurn(t *testing.T) {
	t.Parallel()
	for _, c := range deathCaps {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, map[string]string{"TESTAGENT_CAPS": c.caps})
			o := chatstest.New(t, f.b, f.dir)
			pid := chatPID(t, o)
			conv := o.Chat().ConversationID()
			o.Send(t, "t2", "hang")
			o.WaitText(t, "t2", "hanging")
			cancelled := time.Now()
			o.Cancel(t, "t2")
			o.Send(t, "t3", "history")
			checkCarriedOn(t, o, "t3", c.load, conv)
			started, _ := o.StartedAt("t3")
			t.Logf("from the cancel to the next turn's start: %v", started.Sub(cancelled).Round(time.Millisecond))
			if !strings.Contains(f.log.String(), "did not end the cancelled turn in time; killing it") {
				t.Error("the hung agent was not killed for ignoring the cancel")
			}
			if !pluginstest.ProcessGone(pid) {
				t.Errorf("the hung agent (pid %d) runs on", pid)
			}
		})
	}
}
