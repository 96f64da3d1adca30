package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

func queue(c *hosttest.Client, chat, id, text string) {
	c.Dispatch(chat, &protocol.ChatPendingMessageSetAction{
		Kind: protocol.PendingMessageKindQueued, ID: id,
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
}

// TestPendingMessagesOutliveRestart: a steering message and a queued one,
// left waiting behind a turn when the host stops (cleanly, so the next
// start reads the records, or as after a crash, from the journal), are
// still there when it starts again: the queued message is sent as the
// next turn, and the steering message reaches the agent in it.
func TestPendingMessagesOutliveRestart(t *testing.T) {
	t.Parallel()
	slow(t)
	for _, crash := range []bool{false, true} {
		name := "clean stop"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			j := openJournal(t)
			state := t.TempDir()
			th := startHost(t, state, withJournal(j))
			c := th.client("c1")
			_, chat := th.newSession(c, "s1", nil)
			startTaken(t, c, chat, "t1", "ask Go on?")
			asking(t, c, chat)
			steer(c, chat, "m1", "say steered along")
			queue(c, chat, "q1", "say from the queue")
			c.WaitState(chat, "both messages to wait", func(s protocol.ChannelState) bool {
				cs := s.(*protocol.ChatState)
				return cs.SteeringMessage != nil && len(cs.QueuedMessages) == 1
			})
			th.stop()
			if crash {
				unmarkClean(t, j)
			}

			th = startHost(t, state, withJournal(j))
			c = th.client("c1")
			c.Subscribe("ahp-session:/s1")
			c.Subscribe(chat)
			cs := c.WaitState(chat, "the queued message's turn to end", func(s protocol.ChannelState) bool {
				cs := s.(*protocol.ChatState)
				return cs.ActiveTurn == nil && len(cs.Turns) == 2
			}).(*protocol.ChatState)
			got := text(cs.Turns[1].ResponseParts)
			if !strings.Contains(got, "from the queue") || !strings.Contains(got, "steered along") {
				t.Errorf("the turn after the restart said %q; want the queued message and the steering one", got)
			}
			if cs.SteeringMessage != nil || len(cs.QueuedMessages) != 0 {
				t.Errorf("left waiting: steering %v, queued %v", cs.SteeringMessage, cs.QueuedMessages)
			}
		})
	}
}

// unmarkClean takes away the mark a clean stop left, so the next start
// reads every session's journal as after a crash.
func unmarkClean(t *testing.T, j *journal.Journal) {
	t.Helper()
	if err := j.SetMark(context.Background(), host.CleanKey, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}
