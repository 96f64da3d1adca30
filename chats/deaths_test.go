package chats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ahpd/ahpd/chats/chatstest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// backend starts fakeAgents: resumable or not, and, when it resumes,
// under the conversation's id or, with newIDs, under a new one (a
// backend that could not bring the conversation back).
type backend struct {
	resumable, newIDs bool

	mu     sync.Mutex
	agents []*agent
}

func (b *backend) Info() protocol.AgentInfo             { return protocol.AgentInfo{Provider: "fake"} }
func (b *backend) ConfigProperties() []plugins.Property { return nil }
func (b *backend) Turns(context.Context, plugins.Conversation) ([]protocol.Turn, error) {
	return nil, plugins.ErrNotFound
}
func (b *backend) Delete(context.Context, plugins.Conversation) error { return nil }

func (b *backend) Start(_ context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := opts.Conversation.ID
	if !opts.Resume || !b.resumable || b.newIDs {
		id = fmt.Sprintf("conv-%d", len(b.agents)+1)
	}
	a := &agent{id: id, resumable: b.resumable, dead: make(chan struct{})}
	b.agents = append(b.agents, a)
	return a, nil
}

func (b *backend) agent(i int) *agent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.agents[i]
}

// agent runs a prompt's lines: "say TEXT" says it, "die" ends the agent
// of itself, as a process that exits.
type agent struct {
	id        string
	resumable bool
	dead      chan struct{}
	once      sync.Once
	closed    atomic.Bool
}

var (
	_ plugins.Mortal    = (*agent)(nil)
	_ plugins.Resumable = (*agent)(nil)
)

func (a *agent) ID() string            { return a.id }
func (a *agent) CanResume() bool       { return a.resumable }
func (a *agent) Dead() <-chan struct{} { return a.dead }
func (a *agent) die()                  { a.once.Do(func() { close(a.dead) }) }
func (a *agent) Close() error          { a.closed.Store(true); a.die(); return nil }

func (a *agent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	select {
	case <-a.dead:
		return errors.New("the agent is gone")
	default:
	}
	for line := range strings.Lines(msg.Text) {
		cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "say":
			t.Text(rest)
		case "die":
			a.die()
			return errors.New("the agent's process exited")
		}
	}
	return nil
}

// TestDeadAgentIsReplaced: an agent that dies mid-turn fails the turn,
// and the next message starts a new one, which says it remembers nothing
// when the conversation did not come back with it.
func TestDeadAgentIsReplaced(t *testing.T) {
	for _, tt := range []struct {
		name              string
		resumable, newIDs bool
		wantNote          bool
	}{
		{"resumed", true, false, false},
		{"not resumable", false, false, true},
		{"resumable, but came back as another", true, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{resumable: tt.resumable, newIDs: tt.newIDs}
			o := chatstest.New(t, b, t.TempDir())
			o.Send(t, "t1", "say one")
			if turn := o.WaitEnded(t, "t1"); turn.State != protocol.TurnStateComplete {
				t.Fatalf("t1 ended %s", turn.State)
			}
			o.Send(t, "t2", "say two\ndie")
			turn := o.WaitEnded(t, "t2")
			e, ok := chatstest.ErrorOf(turn)
			if turn.State != protocol.TurnStateError || !ok || !strings.Contains(e.Message, "process exited") ||
				!strings.Contains(e.Message, "the next message starts it again") {
				t.Fatalf("t2 ended %s with %+v", turn.State, e)
			}
			if o.Chat().HasAgent() || !b.agent(0).closed.Load() {
				t.Error("the dead agent is kept")
			}
			o.Send(t, "t3", "say three")
			turn = o.WaitEnded(t, "t3")
			if turn.State != protocol.TurnStateComplete || !strings.HasSuffix(chatstest.Response(turn.ResponseParts), "three") {
				t.Fatalf("t3 ended %s: %+v", turn.State, turn.ResponseParts)
			}
			if n := o.Starts(); n != 2 {
				t.Errorf("%d agents started, want 2", n)
			}
			if chatstest.HasNote(turn) != tt.wantNote {
				t.Errorf("t3 has the restart note: %v, want %v: %+v", !tt.wantNote, tt.wantNote, turn.ResponseParts)
			}
			// The note is said once.
			o.Send(t, "t4", "say four")
			if turn := o.WaitEnded(t, "t4"); chatstest.HasNote(turn) {
				t.Errorf("t4 has the restart note too")
			}
		})
	}
}

// TestAgentDiedBetweenTurns: an agent that died while the chat was idle
// is not given the next turn, and counts as one the chat may let go.
func TestAgentDiedBetweenTurns(t *testing.T) {
	for _, resumable := range []bool{true, false} {
		t.Run(fmt.Sprint("resumable=", resumable), func(t *testing.T) {
			b := &backend{resumable: resumable}
			o := chatstest.New(t, b, t.TempDir())
			o.Send(t, "t1", "say one")
			o.WaitEnded(t, "t1")
			if got := o.Chat().CanLetGo(); got != resumable {
				t.Errorf("CanLetGo() = %v with the agent alive", got)
			}
			b.agent(0).die()
			if !o.Chat().CanLetGo() {
				t.Error("a chat whose agent died cannot be let go")
			}
			o.Send(t, "t2", "say two")
			turn := o.WaitEnded(t, "t2")
			if turn.State != protocol.TurnStateComplete || o.Starts() != 2 {
				t.Fatalf("t2 ended %s with %d agents started: %+v", turn.State, o.Starts(), turn.ResponseParts)
			}
			if chatstest.HasNote(turn) == resumable {
				t.Errorf("t2 has the restart note: %v", !resumable)
			}
		})
	}
}

// TestLetGoWithoutResume: closing an agent that cannot resume, as a client
// suspending the session does, costs its memory: the chat keeps its turns
// as it falls asleep, and the next turn says the agent forgot them.
// Closing one that can costs nothing.
func TestLetGoWithoutResume(t *testing.T) {
	for _, resumable := range []bool{true, false} {
		t.Run(fmt.Sprint("resumable=", resumable), func(t *testing.T) {
			b := &backend{resumable: resumable}
			o := chatstest.New(t, b, t.TempDir())
			o.Send(t, "t1", "say one")
			o.WaitEnded(t, "t1")
			if err := o.Chat().Close(); err != nil {
				t.Fatal(err)
			}
			// Falling asleep, the chat keeps the turns no backend can
			// give back.
			var kept int
			o.Do(func() {
				o.Chat().ForgetTurns()
				kept = len(o.Chat().State().Turns)
			})
			if want := map[bool]int{true: 0, false: 1}[resumable]; kept != want {
				t.Errorf("%d turns kept as the chat fell asleep, want %d", kept, want)
			}
			// Woken as a sleeping session is: the agent starts before
			// any turn, and the note waits for one.
			if err := o.Chat().Warm(context.Background()); err != nil {
				t.Fatal(err)
			}
			o.Send(t, "t2", "say two")
			if turn := o.WaitEnded(t, "t2"); chatstest.HasNote(turn) == resumable {
				t.Errorf("t2 has the restart note: %v: %+v", !resumable, turn.ResponseParts)
			}
		})
	}
}

// TestNoNoteForANewChat: an agent that died before the chat's first turn
// forgot nothing.
func TestNoNoteForANewChat(t *testing.T) {
	b := &backend{}
	o := chatstest.New(t, b, t.TempDir())
	if err := o.Chat().Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.agent(0).die()
	o.Send(t, "t1", "say one")
	if turn := o.WaitEnded(t, "t1"); turn.State != protocol.TurnStateComplete || chatstest.HasNote(turn) {
		t.Errorf("t1 ended %s: %+v", turn.State, turn.ResponseParts)
	}
}
