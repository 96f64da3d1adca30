package host_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

func steer(c *hosttest.Client, chat, id, text string) {
	c.Dispatch(chat, &protocol.ChatPendingMessageSetAction{
		Kind: protocol.PendingMessageKindSteering, ID: id,
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
}

// saying waits for the active turn to have said something.
func saying(t *testing.T, c *hosttest.Client, chat, words string) {
	t.Helper()
	c.WaitState(chat, "the turn to say "+words, func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), words)
	})
}

// asking waits for the active turn's question and returns its id.
func asking(t *testing.T, c *hosttest.Client, chat string) string {
	t.Helper()
	var id string
	c.WaitState(chat, "the question", func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		if at == nil {
			return false
		}
		for _, p := range at.ResponseParts {
			if ir, ok := p.(*protocol.InputRequestResponsePart); ok && ir.Request.Answers.Len() == 0 {
				id = ir.Request.ID
				return true
			}
		}
		return false
	})
	return id
}

func answer(c *hosttest.Client, chat, reqID, value string) {
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	answers.Set("answer", &protocol.ChatInputAnswered{State: "submitted", Value: &protocol.ChatInputTextAnswerValue{Value: value}})
	c.Dispatch(chat, &protocol.ChatInputCompletedAction{RequestID: reqID, Response: protocol.ChatInputResponseKindAccept, Answers: answers})
}

// A steering message reaches the agent in the turn it was sent in: the
// script stops waiting and does what it was told, then goes on.
func TestSteeringReachesTheAgentMidTurn(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "say working\nwait 5\nsay after the wait")
	saying(t, c, chat, "working")
	steer(c, chat, "m1", "say steered")
	cs := waitTurnEnd(t, c, chat, "t1")
	got := text(cs.Turns[0].ResponseParts)
	if i, j := strings.Index(got, "steered"), strings.Index(got, "after the wait"); i < 0 || j < i {
		t.Errorf("the turn said %q; want the steering acted on before the rest of the script", got)
	}
	if len(cs.Turns) != 1 || cs.SteeringMessage != nil || cs.Turns[0].State != protocol.TurnStateComplete {
		t.Errorf("%d turns, steering %v, state %s; want the one turn completed and nothing pending", len(cs.Turns), cs.SteeringMessage, cs.Turns[0].State)
	}
}

// deaf is the script backend with agents that never look for steering
// themselves, as the Claude CLI and ACP agents do not.
type deaf struct{ plugins.Backend }

func (b deaf) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	a, err := b.Backend.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return deafAgent{a}, nil
}

type deafAgent struct{ plugins.Agent }

func (a deafAgent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	return a.Agent.Prompt(ctx, msg, deafTurn{t})
}

type deafTurn struct{ plugins.Turn }

func (deafTurn) Steered() <-chan struct{}        { return nil }
func (deafTurn) Steer() (protocol.Message, bool) { return protocol.Message{}, false }

// An agent that takes no steering while it works is given the message
// once its reply ends, in the same turn.
func TestSteeringAnAgentThatCannotBeInterrupted(t *testing.T) {
	t.Parallel()
	th := startHost(t, "", func(o *host.Options) {
		reg := plugins.NewRegistry()
		if err := reg.Register(deaf{script.New(filepath.Join(o.StateDir, "transcripts", "script"))}); err != nil {
			t.Fatal(err)
		}
		o.Backends = reg
	})
	c := th.client("c1")
	_, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "ask Go on?\nsay first reply")
	req := asking(t, c, chat)
	steer(c, chat, "m1", "say steered")
	c.WaitState(chat, "the steering message to wait", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).SteeringMessage != nil
	})
	answer(c, chat, req, "yes")
	cs := waitTurnEnd(t, c, chat, "t1")
	got := text(cs.Turns[0].ResponseParts)
	if i, j := strings.Index(got, "first reply"), strings.Index(got, "steered"); i < 0 || j < i {
		t.Errorf("the turn said %q; want its reply, then the steering acted on", got)
	}
	if len(cs.Turns) != 1 || cs.SteeringMessage != nil {
		t.Errorf("%d turns, steering %v; want one turn and nothing pending", len(cs.Turns), cs.SteeringMessage)
	}
}

// Steering an idle chat starts a turn with the message; steering a turn
// that is then cancelled goes with it. Either way the session is left
// with nothing in hand, and sleeps.
func TestSteeringLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	r := newResidency(time.Minute, 0)
	th := startHost(t, "", r.option())
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	steer(c, chat, "m1", "say from steering")
	cs := c.WaitState(chat, "a turn from the steering message", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) == 1 && cs.ActiveTurn == nil
	}).(*protocol.ChatState)
	if got := text(cs.Turns[0].ResponseParts); !strings.Contains(got, "from steering") || cs.SteeringMessage != nil {
		t.Errorf("the turn said %q, steering left %v", got, cs.SteeringMessage)
	}

	startTurn(c, chat, "t2", "ask Go on?")
	asking(t, c, chat)
	steer(c, chat, "m2", "say never")
	c.WaitState(chat, "the steering message to wait", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).SteeringMessage != nil
	})
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t2", Duration: 1})
	waitTurnEnd(t, c, chat, "t2")
	cs = c.WaitState(chat, "the steering message to go", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).SteeringMessage == nil
	}).(*protocol.ChatState)
	if len(cs.Turns) != 2 || strings.Contains(text(cs.Turns[1].ResponseParts), "never") {
		t.Errorf("a cancelled turn's steering message ran: %d turns, %q", len(cs.Turns), text(cs.Turns[1].ResponseParts))
	}

	th.leave(c, "c1")
	r.advance(t, r.sleepAfter)
	r.untilStatus(t, th, session, "inactive") // once the agent has stopped the turn
}
