package chats_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/chats/chatstest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// gated starts gateAgents, which share one gate a test opens.
type gated struct {
	backend
	gate chan struct{} // closed to let every "hold" go on
	once sync.Once
}

func newGated() *gated { return &gated{gate: make(chan struct{})} }

func (g *gated) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gated) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	a, err := g.backend.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &gateAgent{agent: a.(*agent), gate: g.gate}, nil
}

// gateAgent runs a prompt's lines: "say TEXT" says it; "hold" waits for
// the gate or the turn's end; "steerable" waits for a steering message
// and says what it was told.
type gateAgent struct {
	*agent
	gate <-chan struct{}
}

func (a *gateAgent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	for line := range strings.Lines(msg.Text) {
		cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "say":
			t.Text(rest)
		case "hold":
			select {
			case <-a.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		case "steerable":
			select {
			case <-t.Steered():
				if m, ok := t.Steer(); ok {
					t.Text("steered: " + m.Text)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func userMessage(text string) protocol.Message {
	return protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
}

// TestTurnCompletes: a turn's text is the chat's, in one part, and the
// turn ends complete with the chat idle.
func TestTurnCompletes(t *testing.T) {
	o := chatstest.New(t, newGated(), t.TempDir())
	o.Send(t, "t1", "say hello\nsay world")
	turn := o.WaitEnded(t, "t1")
	if turn.State != protocol.TurnStateComplete || chatstest.Response(turn.ResponseParts) != "helloworld" {
		t.Fatalf("turn %s: %q", turn.State, chatstest.Response(turn.ResponseParts))
	}
	o.Do(func() {
		if !o.Chat().Idle() || o.Chat().State().ActiveTurn != nil {
			t.Error("the chat is not idle after its turn")
		}
	})
}

// TestValidateRefuses: each client action a chat cannot take is refused
// with why, and changes nothing.
func TestValidateRefuses(t *testing.T) {
	g := newGated()
	o := chatstest.New(t, g, t.TempDir())
	o.Send(t, "done", "say one")
	o.WaitEnded(t, "done")
	o.Send(t, "running", "hold")
	yes := true
	for _, c := range []struct {
		name string
		a    protocol.Action
		why  string
	}{
		{"a turn without an id", &protocol.ChatTurnStartedAction{Message: userMessage("hi")}, "needs an id"},
		{"a turn while one runs", &protocol.ChatTurnStartedAction{TurnID: "t3", Message: userMessage("hi")}, "queue the message instead"},
		{"a cancel of a turn not running", &protocol.ChatTurnCancelledAction{TurnID: "done"}, "no active turn"},
		{"a resume while a turn runs", &protocol.ChatTurnResumeAction{TurnID: "done"}, "already running"},
		{"an approval that says not how", &protocol.ChatToolCallConfirmedAction{ToolCallID: "x", Approved: yes}, "needs confirmed"},
		{"a denial without a reason", &protocol.ChatToolCallConfirmedAction{ToolCallID: "x"}, "needs a reason"},
		{"a tool call the client does not run", &protocol.ChatToolCallCompleteAction{ToolCallID: "x"}, "not run by this client"},
		{"a truncation after no such turn", &protocol.ChatTruncatedAction{TurnID: new("nope")}, "no turn"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before int
			o.Do(func() { before = len(o.Chat().State().Turns) })
			err := o.Dispatch(c.a)
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want a refusal saying %q", err, c.why)
			}
			o.Do(func() {
				if n := len(o.Chat().State().Turns); n != before {
					t.Errorf("a refused action changed the turns: %d to %d", before, n)
				}
			})
		})
	}
	// A turn with the id of one that ended is refused once none runs.
	g.open()
	o.WaitEnded(t, "running")
	if err := o.Dispatch(&protocol.ChatTurnStartedAction{TurnID: "done", Message: userMessage("again")}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a turn id used again: %v", err)
	}
}

// TestCancelEndsTurn: a cancelled turn ends cancelled at once, keeping
// what it had said, and its agent is told to stop.
func TestCancelEndsTurn(t *testing.T) {
	o := chatstest.New(t, newGated(), t.TempDir())
	o.Send(t, "t1", "say working\nhold\nsay never")
	o.WaitText(t, "t1", "working")
	o.Cancel(t, "t1")
	turn := o.WaitEnded(t, "t1")
	if turn.State != protocol.TurnStateCancelled || chatstest.Response(turn.ResponseParts) != "working" {
		t.Fatalf("turn %s: %q", turn.State, chatstest.Response(turn.ResponseParts))
	}
	var done <-chan struct{}
	o.Do(func() { done = o.Chat().Done() })
	select {
	case <-done: // the runner gave the turn up: the agent's Prompt returned
	case <-time.After(chatstest.Timeout):
		t.Fatal("the cancelled turn's runner did not end")
	}
}

// TestQueuedMessageRunsAfterTurn: a message queued while a turn runs
// starts as the next turn once it ends, and leaves the queue.
func TestQueuedMessageRunsAfterTurn(t *testing.T) {
	g := newGated()
	o := chatstest.New(t, g, t.TempDir())
	o.Send(t, "t1", "hold\nsay first")
	if err := o.Dispatch(&protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: "q1", Message: userMessage("say second")}); err != nil {
		t.Fatal(err)
	}
	o.Do(func() {
		if q := o.Chat().State().QueuedMessages; len(q) != 1 {
			t.Errorf("queued while a turn runs: %+v", q)
		}
	})
	g.open()
	if turn := o.WaitEnded(t, "t1"); turn.State != protocol.TurnStateComplete {
		t.Fatalf("t1 %s", turn.State)
	}
	var next protocol.Turn
	o.Wait(t, "the queued message's turn to end", func() bool {
		ts := o.Chat().State().Turns
		if len(ts) < 2 || o.Chat().State().ActiveTurn != nil {
			return false
		}
		next = ts[1]
		return true
	})
	if next.State != protocol.TurnStateComplete || chatstest.Response(next.ResponseParts) != "second" || next.Message.Text != "say second" {
		t.Errorf("the queued turn: %s %q (%q)", next.State, chatstest.Response(next.ResponseParts), next.Message.Text)
	}
	o.Do(func() {
		if q := o.Chat().State().QueuedMessages; len(q) != 0 {
			t.Errorf("still queued: %+v", q)
		}
	})
}

// TestSteeringReachesRunningTurn: a steering message goes to the turn
// running, which acts on it before it ends; none is left pending.
func TestSteeringReachesRunningTurn(t *testing.T) {
	o := chatstest.New(t, newGated(), t.TempDir())
	o.Send(t, "t1", "say started\nsteerable")
	o.WaitText(t, "t1", "started")
	if err := o.Dispatch(&protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindSteering, ID: "s1", Message: userMessage("use tabs")}); err != nil {
		t.Fatal(err)
	}
	turn := o.WaitEnded(t, "t1")
	if got := chatstest.Response(turn.ResponseParts); turn.State != protocol.TurnStateComplete || !strings.Contains(got, "steered: use tabs") {
		t.Fatalf("turn %s: %q", turn.State, got)
	}
	o.Do(func() {
		if m := o.Chat().State().SteeringMessage; m != nil {
			t.Errorf("a steering message left pending: %+v", m)
		}
		if n := len(o.Chat().State().Turns); n != 1 {
			t.Errorf("%d turns, want the one steered", n)
		}
	})
}

// TestSteeringDroppedOnCancel: the steering message of a turn that is
// cancelled goes with it, and starts no turn of its own.
func TestSteeringDroppedOnCancel(t *testing.T) {
	o := chatstest.New(t, newGated(), t.TempDir())
	o.Send(t, "t1", "say started\nhold")
	o.WaitText(t, "t1", "started")
	if err := o.Dispatch(&protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindSteering, ID: "s1", Message: userMessage("say nope")}); err != nil {
		t.Fatal(err)
	}
	o.Cancel(t, "t1")
	o.WaitEnded(t, "t1")
	o.Do(func() {
		s := o.Chat().State()
		if s.SteeringMessage != nil || s.ActiveTurn != nil || len(s.Turns) != 1 {
			t.Errorf("after the cancel: steering %+v, active %v, %d turns", s.SteeringMessage, s.ActiveTurn != nil, len(s.Turns))
		}
	})
}
