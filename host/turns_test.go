package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

func startTurn(c *hosttest.Client, chat, turnID, text string) {
	c.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
}

// pendingTool waits for a tool call of the active turn to wait for
// confirmation and returns its id.
func pendingTool(t *testing.T, c *hosttest.Client, chat string) string {
	t.Helper()
	var id string
	c.WaitState(chat, "a tool call to confirm", func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		if at == nil {
			return false
		}
		for _, p := range at.ResponseParts {
			if tp, ok := p.(*protocol.ToolCallResponsePart); ok {
				if pc, ok := tp.ToolCall.(*protocol.ToolCallPendingConfirmationState); ok {
					id = pc.ToolCallID
					return true
				}
			}
		}
		return false
	})
	return id
}

func TestToolConfirmation(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil) // autoApprove defaults to asking

	// Approved: the file is written, and the session's input queue shows
	// the wait while it lasts.
	startTurn(c, chat, "t1", "write a.txt alpha")
	id := pendingTool(t, c, chat)
	c.WaitState(session, "the session to mirror the wait", func(s protocol.ChannelState) bool {
		ss := s.(*protocol.SessionState)
		return len(ss.InputNeeded) == 1 && ss.Status.Activity() == protocol.StatusInputNeeded
	})
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t1", ToolCallID: id, Approved: true,
		Confirmed: new(protocol.ToolCallConfirmationReasonUserAction)})
	waitTurnEnd(t, c, chat, "t1")
	if data, err := os.ReadFile(filepath.Join(th.work, "a.txt")); err != nil || string(data) != "alpha" {
		t.Errorf("a.txt = %q, %v; want alpha", data, err)
	}
	c.WaitState(session, "the wait to go", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.SessionState).InputNeeded) == 0
	})

	// Denied: nothing is written, and the call ends cancelled.
	startTurn(c, chat, "t2", "write b.txt beta")
	id = pendingTool(t, c, chat)
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t2", ToolCallID: id, Approved: false,
		Reason: new(protocol.ToolCallCancellationReasonDenied)})
	cs := waitTurnEnd(t, c, chat, "t2")
	if _, err := os.Stat(filepath.Join(th.work, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt was written after a denial (%v)", err)
	}
	tp := cs.Turns[len(cs.Turns)-1].ResponseParts[0].(*protocol.ToolCallResponsePart)
	if _, ok := tp.ToolCall.(*protocol.ToolCallCancelledState); !ok {
		t.Errorf("denied call ended as %T", tp.ToolCall)
	}
	// The turn says what became of the write, not an empty answer.
	if got := text(cs.Turns[len(cs.Turns)-1].ResponseParts); !strings.Contains(got, "Skipped writing `b.txt`: the write was denied.") {
		t.Errorf("the denied turn's text is %q", got)
	}

	// With autoApprove "allow" (the permissions' mode bypass) nothing is
	// asked, and the call is marked as confirmed by a setting.
	_, chat2 := th.newSession(c, "s2", map[string]any{"autoApprove": "allow"})
	cs = send(t, c, chat2, "t1", "write c.txt gamma")
	done := cs.Turns[0].ResponseParts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
	if done.Confirmed != protocol.ToolCallConfirmationReasonSetting || !done.Success {
		t.Errorf("auto-approved call: confirmed %s, success %v", done.Confirmed, done.Success)
	}

	// A path outside the working directory is refused, not written.
	cs = send(t, c, chat2, "t2", "write ../escape.txt nope")
	refused := cs.Turns[1].ResponseParts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
	if refused.Success {
		t.Error("a write outside the working directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(th.work), "escape.txt")); !os.IsNotExist(err) {
		t.Error("a file outside the working directory was written")
	}
}

func TestQuestionAndAnswer(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "ask What is your name?")
	answer(c, chat, asking(t, c, chat), "Ada")
	cs := waitTurnEnd(t, c, chat, "t1")
	if got := text(cs.Turns[0].ResponseParts); !strings.Contains(got, "Ada") {
		t.Errorf("the turn did not say the answer: %q", got)
	}
}

func TestCancelAndFailEndTurns(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)

	startTurn(c, chat, "t1", "say waiting\nwait 30s\nsay never")
	c.WaitState(chat, "the first words", func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), "waiting")
	})
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 5})
	cs := waitTurnEnd(t, c, chat, "t1")
	if got := cs.Turns[0]; got.State != protocol.TurnStateCancelled || strings.Contains(text(got.ResponseParts), "never") {
		t.Errorf("cancelled turn: state %s, text %q", got.State, text(got.ResponseParts))
	}
	// A new turn is taken at once, and runs once the cancelled one has
	// stopped.
	cs = send(t, c, chat, "t2", "fail the disk is full")
	last := cs.Turns[len(cs.Turns)-1]
	if last.State != protocol.TurnStateError || last.ErrorPart() == nil || !strings.Contains(errorText(last), "the disk is full") {
		t.Errorf("failed turn: state %s, error %+v", last.State, last.ErrorPart())
	}
	if last.Duration == nil {
		t.Error("a failed turn has no duration")
	}
	if cs.Status.Activity() != protocol.StatusError {
		t.Errorf("chat status after a failure = %d", cs.Status)
	}
}

func TestQueuedMessageRunsAfterTheTurn(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "wait 200ms\nsay first")
	c.Dispatch(chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: "q1",
		Message: protocol.Message{Text: "say second", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}})
	cs := c.WaitState(chat, "both turns", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 2 && cs.ActiveTurn == nil
	}).(*protocol.ChatState)
	if !strings.Contains(text(cs.Turns[1].ResponseParts), "second") || cs.QueuedMessages != nil {
		t.Errorf("second turn %q, queue %v", text(cs.Turns[1].ResponseParts), cs.QueuedMessages)
	}
}

// TestConfigChangeReachesTheAgent checks that a session-mutable key changed
// on a running session applies to its next turn.
func TestConfigChangeReachesTheAgent(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi") // the agent runs
	c.Dispatch(session, &protocol.SessionConfigChangedAction{Config: protocol.Object{"autoApprove": []byte(`"allow"`)}})
	c.WaitState(session, "the new value", func(s protocol.ChannelState) bool {
		return string(s.(*protocol.SessionState).Config.Values["autoApprove"]) == `"allow"`
	})
	cs := send(t, c, chat, "t2", "write d.txt delta")
	done, ok := cs.Turns[1].ResponseParts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
	if !ok || done.Confirmed != protocol.ToolCallConfirmationReasonSetting {
		t.Errorf("after autoApprove=allow the write was %+v", cs.Turns[1].ResponseParts[0])
	}
}

// TestTruncateAndDraft checks two client actions that change a chat
// without a turn: truncation (which also stops a running turn) and the
// draft, which every client sees.
func TestTruncateAndDraft(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say one")
	send(t, c, chat, "t2", "say two")
	startTurn(c, chat, "t3", "wait 30s")
	c.WaitState(chat, "t3 to run", func(s protocol.ChannelState) bool { return s.(*protocol.ChatState).ActiveTurn != nil })
	c.Dispatch(chat, &protocol.ChatTruncatedAction{TurnID: new("t1")})
	cs := c.WaitState(chat, "the truncation", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 1 && cs.ActiveTurn == nil
	}).(*protocol.ChatState)
	if cs.Turns[0].ID != "t1" {
		t.Errorf("kept turn %s, want t1", cs.Turns[0].ID)
	}
	// The stopped turn's runner lets go: a new turn is taken at once and runs.
	cs = send(t, c, chat, "t4", "say four")
	if n := len(cs.Turns); n != 2 {
		t.Errorf("%d turns after truncating and sending, want 2", n)
	}

	other := th.client("c2")
	other.Subscribe(chat)
	draft := &protocol.Message{Text: "half a thought", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	c.Dispatch(chat, &protocol.ChatDraftChangedAction{Draft: draft})
	other.WaitState(chat, "the draft", func(s protocol.ChannelState) bool {
		d := s.(*protocol.ChatState).Draft
		return d != nil && d.Text == "half a thought"
	})
}
