package host_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// forgetful is the script backend with agents that say their
// conversation does not survive Close, as an ACP agent that can neither
// load nor resume sessions.
type forgetful struct{ plugins.Backend }

func (b forgetful) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	a, err := b.Backend.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return forgetfulAgent{a}, nil
}

type forgetfulAgent struct{ plugins.Agent }

func (forgetfulAgent) CanResume() bool { return false }

func withForgetful() hostOption {
	return func(o *host.Options) {
		reg := plugins.NewRegistry()
		if err := reg.Register(forgetful{script.New(filepath.Join(o.StateDir, "transcripts", "script"))}); err != nil {
			panic(err)
		}
		o.Backends = reg
	}
}

// TestSuspendForgetfulAgent: a quiet session whose agent cannot resume
// keeps it (it does not fall asleep of itself), but a client suspending
// it lets the agent go; the chat keeps its turns, and the next turn
// starts with the note that the agent does not remember them.
func TestSuspendForgetfulAgent(t *testing.T) {
	t.Parallel()
	r := newResidency(time.Minute, 0)
	th := startHost(t, "", withForgetful(), r.option())
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hello")
	th.leave(c, "c1")

	r.advance(t, 2*time.Minute)
	if got := status(t, th, session); got != "active" {
		t.Fatalf("a quiet session whose agent cannot resume fell asleep of itself: %s", got)
	}

	c = th.client("c2")
	suspendAsleep(t, c, session)
	c.Subscribe(chat)
	cs := send(t, c, chat, "t2", "say again")
	if len(cs.Turns) != 2 || cs.Turns[0].ID != "t1" {
		t.Fatalf("after the suspension the chat has turns %+v", cs.Turns)
	}
	t2 := cs.Turns[1]
	md, ok := t2.ResponseParts[0].(*protocol.MarkdownResponsePart)
	if t2.State != protocol.TurnStateComplete || !ok || md.Content != chats.RestartNote {
		t.Errorf("t2 ended %s with %+v, want it to start with the restart note", t2.State, t2.ResponseParts)
	}
	if got := strings.TrimSpace(text(t2.ResponseParts[1:])); got != "again" {
		t.Errorf("t2 said %q", got)
	}
}
