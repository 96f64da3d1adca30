// Package chatstest runs one chat for tests, with an Owner standing in
// for the host's session: it applies the chat's actions, dispatches a
// client's, starts the chat's agents on a backend as the host does (the
// conversation resumed once it has started), and lets a test wait for a
// turn's end or any change of the chat's state.
//
// It is for tests only; nothing imports it outside tests.
package chatstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// Timeout bounds every wait of the package: a guard against a hang, not
// a measure of anything.
const Timeout = 30 * time.Second

// Owner is a chats.Owner holding one chat.
type Owner struct {
	chat    *chats.Chat
	backend plugins.Backend
	dir     string

	mu      sync.Mutex
	changed chan struct{} // closed, and made anew, at every change
	actions []protocol.Action
	ended   map[string]protocol.TurnState
	started map[string]time.Time // when each turn reached its agent
	starts  int                  // agents Start was asked for
	agents  []plugins.Agent      // the agents started, in order
	conv    string               // the conversation the next agent starts with
	resume  bool                 // it has started: resume it
}

var _ chats.Owner = (*Owner)(nil)

// New returns a chat whose agents run on b in dir, and stops it (its turn
// cancelled, its agent closed) when the test ends.
func New(t testing.TB, b plugins.Backend, dir string) *Owner {
	o := &Owner{
		backend: b,
		dir:     dir,
		changed: make(chan struct{}),
		ended:   map[string]protocol.TurnState{},
		started: map[string]time.Time{},
		conv:    "conv",
	}
	o.chat = chats.New(chats.Options{
		URI: "ahp-chat://test/chat",
		State: &protocol.ChatState{
			Resource: "ahp-chat://test/chat", Title: "Chat", Status: protocol.StatusIdle,
			Origin: &protocol.ChatOriginUser{}, Turns: []protocol.Turn{},
		},
		Owner: o,
		Start: o.start,
	})
	t.Cleanup(func() {
		var done <-chan struct{}
		o.Do(func() { done = o.chat.Cancel() })
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		select {
		case <-done:
		case <-ctx.Done():
			t.Errorf("the chat's turn did not end")
		}
		if err := o.chat.Stop(ctx); err != nil {
			t.Errorf("stopping the chat: %v", err)
		}
	})
	return o
}

// Chat returns the chat.
func (o *Owner) Chat() *chats.Chat { return o.chat }

// start starts an agent as the host does: the conversation anew until
// one has started, then resumed under the id its agent reported.
func (o *Owner) start(ctx context.Context) (plugins.Agent, error) {
	o.mu.Lock()
	opts := plugins.StartOptions{Conversation: plugins.Conversation{ID: o.conv, Dir: o.dir}, Resume: o.resume}
	o.starts++
	o.mu.Unlock()
	a, err := o.backend.Start(ctx, opts)
	if err == nil {
		o.mu.Lock()
		o.agents = append(o.agents, a)
		o.mu.Unlock()
	}
	return a, err
}

// Starts returns how many agents the chat asked for.
func (o *Owner) Starts() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.starts
}

// Agent returns the agent the chat started i-th, from 0.
func (o *Owner) Agent(i int) plugins.Agent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.agents[i]
}

// Do runs fn with the owner's lock held.
func (o *Owner) Do(fn func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fn()
}

// Emit applies a to the chat. Called with the lock held.
func (o *Owner) Emit(c *chats.Chat, a protocol.Action) bool {
	if !c.Apply(a) {
		return false
	}
	o.actions = append(o.actions, a)
	o.changedLocked()
	return true
}

func (o *Owner) changedLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Started records that a turn reached the agent, and the conversation
// the agent runs, which later agents resume.
func (o *Owner) Started(c *chats.Chat) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conv, o.resume = c.ConversationID(), true
	if at := c.State().ActiveTurn; at != nil {
		if _, ok := o.started[at.ID]; !ok {
			o.started[at.ID] = time.Now()
		}
	}
	o.changedLocked()
}

// StartFailed records nothing: the turn's error says it all.
func (o *Owner) StartFailed(*chats.Chat, error) {}

// Ended records how a turn ended.
func (o *Owner) Ended(_ *chats.Chat, turnID string, state protocol.TurnState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended[turnID] = state
	o.changedLocked()
}

// SetTitle does nothing: the chat has no session to title.
func (o *Owner) SetTitle(string) {}

// Busy does nothing.
func (o *Owner) Busy(*chats.Chat, bool) {}

// Dispatch takes a client's action as the host does: validated, applied,
// then reacted to.
func (o *Owner) Dispatch(a protocol.Action) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if why := o.chat.Validate(a, "test"); why != "" {
		return fmt.Errorf("%T refused: %s", a, why)
	}
	if o.Emit(o.chat, a) {
		o.chat.React(a)
	}
	return nil
}

// Send starts a turn with text, as a client's chat/turnStarted does.
func (o *Owner) Send(t testing.TB, turnID, text string) {
	t.Helper()
	err := o.Dispatch(&protocol.ChatTurnStartedAction{
		TurnID:    turnID,
		StartedAt: protocol.FormatTime(time.Now()),
		Message:   protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Cancel cancels the running turn, as a client's chat/turnCancelled does.
func (o *Owner) Cancel(t testing.TB, turnID string) {
	t.Helper()
	if err := o.Dispatch(&protocol.ChatTurnCancelledAction{TurnID: turnID, Duration: 1}); err != nil {
		t.Fatal(err)
	}
}

// StartedAt returns when a turn reached its agent, if it has.
func (o *Owner) StartedAt(turnID string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.started[turnID]
	return at, ok
}

// Wait waits, change by change, until cond holds; cond runs with the lock
// held. It fails the test if that takes longer than Timeout.
func (o *Owner) Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(Timeout)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		ok, changed := cond(), o.changed
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("waited %v for %s", Timeout, what)
		}
	}
}

// WaitEnded waits for a turn to end and for the chat to be told, and
// returns it as the chat keeps it.
func (o *Owner) WaitEnded(t testing.TB, turnID string) protocol.Turn {
	t.Helper()
	var turn protocol.Turn
	o.Wait(t, "turn "+turnID+" to end", func() bool {
		if _, ok := o.ended[turnID]; !ok {
			return false
		}
		for _, tt := range o.chat.State().Turns {
			if tt.ID == turnID {
				turn = tt
				return true
			}
		}
		return false
	})
	return turn
}

// WaitText waits until the running turn turnID has said text.
func (o *Owner) WaitText(t testing.TB, turnID, text string) {
	t.Helper()
	o.Wait(t, fmt.Sprintf("turn %s to say %q", turnID, text), func() bool {
		at := o.chat.State().ActiveTurn
		return at != nil && at.ID == turnID && strings.Contains(Response(at.ResponseParts), text)
	})
}

// Response returns the Markdown of a response, parts joined by newlines.
func Response(parts []protocol.ResponsePart) string {
	var texts []string
	for _, p := range parts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			texts = append(texts, md.Content)
		}
	}
	return strings.Join(texts, "\n")
}

// ErrorOf returns the error a turn ended with, if it did.
func ErrorOf(turn protocol.Turn) (protocol.ErrorInfo, bool) {
	for _, p := range turn.ResponseParts {
		if e, ok := p.(*protocol.ErrorResponsePart); ok {
			return e.Error, true
		}
	}
	return protocol.ErrorInfo{}, false
}

// HasNote reports whether a turn's response starts with chats.RestartNote.
func HasNote(turn protocol.Turn) bool {
	if len(turn.ResponseParts) == 0 {
		return false
	}
	md, ok := turn.ResponseParts[0].(*protocol.MarkdownResponsePart)
	return ok && md.Content == chats.RestartNote
}
