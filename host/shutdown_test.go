package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestCloseStartsNoTurn closes a host while a turn runs with a message
// queued behind it. Once Close has begun a client's new turn is refused;
// when the grace ends the running turn is cancelled, and the queued
// message stays queued rather than starting a turn on an agent that is
// going away.
func TestCloseStartsNoTurn(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, busy := th.newSession(c, "busy", nil)
	_, other := th.newSession(c, "other", nil)
	startTurn(c, busy, "t1", "say waiting\nwait 1h")
	c.WaitState(busy, "t1 to wait", func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), "waiting")
	})
	c.Dispatch(busy, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: "q1",
		Message: protocol.Message{Text: "say later", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}})
	c.WaitState(busy, "q1 to be queued", func(s protocol.ChannelState) bool {
		return len(s.(*protocol.ChatState).QueuedMessages) == 1
	})

	if err := th.h.Ready(); err != nil {
		t.Errorf("a host serving says it is not ready: %v", err)
	}
	grace, endGrace := context.WithCancel(context.Background())
	defer endGrace()
	closed := make(chan error, 1)
	go func() { closed <- th.h.Close(grace) }()

	// A turn sent before Close got to the session runs; from then on
	// turns are refused.
	for i := 1; ; i++ {
		if i > 100 {
			t.Fatal("turns still start while the host closes")
		}
		id := fmt.Sprintf("o%d", i)
		seq := c.Dispatch(other, &protocol.ChatTurnStartedAction{
			TurnID: id, StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: "say hi", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		})
		if reason := answerTo(t, c, seq); reason != nil {
			if !strings.Contains(*reason, "shutting down") {
				t.Errorf("a turn sent while the host closes was refused with %q", *reason)
			}
			if err := th.h.Ready(); err == nil || !strings.Contains(err.Error(), "shutting down") {
				t.Errorf("a host refusing turns as it closes says it is ready (%v)", err)
			}
			break
		}
		waitTurnEnd(t, c, other, id)
	}

	endGrace()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	<-c.Done()
	cs := c.State(busy).(*protocol.ChatState)
	if cs.ActiveTurn != nil || len(cs.Turns) != 1 || cs.Turns[0].ID != "t1" || cs.Turns[0].State != protocol.TurnStateCancelled {
		t.Errorf("the busy chat after Close: active %+v, turns %+v", cs.ActiveTurn, cs.Turns)
	}
	if len(cs.QueuedMessages) != 1 || cs.QueuedMessages[0].ID != "q1" {
		t.Errorf("the queue after Close: %+v", cs.QueuedMessages)
	}
}

// answerTo waits for the host's answer to the action a client dispatched
// as seq: the reason it was refused, or nil once it was applied.
func answerTo(t *testing.T, c *hosttest.Client, seq int64) *string {
	t.Helper()
	var reason *string
	c.Wait("the answer to action "+fmt.Sprint(seq), func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
				reason = e.RejectionReason
				return true
			}
		}
		return false
	})
	return reason
}
