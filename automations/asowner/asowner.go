// Package asowner runs automations' runs as their owners: over an AHP
// connection the host opens for the owner, a run creates its session,
// watches its chat and starts the turn, exactly as a client of theirs
// would, so every grant and root is checked as if they had sent the
// message, and the run is seen by every client like any other session.
//
// It is the automations engine's Runner (automations.Runner), given to the
// host by whoever makes it (host.AutomationOptions.NewRunner). It must not
// decide anything a client could not: what it may do is the host's to
// check.
package asowner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ahpd/ahpd/automations"
	ahpclient "github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// Host is what a run needs of the host.
type Host interface {
	// Connect opens a connection to the host acting for cred, as
	// host.Host.Connect does.
	Connect(cred grants.Credential) (io.ReadWriteCloser, error)
	// Root is who a run without an owner acts for.
	Root() grants.Principal
	// Now is the host's time, for the turns' times.
	Now() time.Time
}

// New returns the runner of h's automations.
func New(h Host) automations.Runner { return runner{h} }

type runner struct{ h Host }

// keepMeta is the createSession _meta key that has a session listed as
// soon as it is made (host: ahpd.keep).
const keepMeta = "ahpd.keep"

// Run implements automations.Runner.
func (r runner) Run(ctx context.Context, req automations.RunRequest) automations.Outcome {
	h := r.h
	p := h.Root()
	if req.Owner != "" {
		var err error
		if p, err = grants.Parse(req.Owner); err != nil {
			return automations.Outcome{Err: fmt.Errorf("the automation's owner %s is not a principal: %w", protocol.Quote(req.Owner), err)}
		}
	}
	stream, err := h.Connect(grants.Credential{Principal: p})
	if err != nil {
		return automations.Outcome{Err: err}
	}
	c, err := ahpclient.Open(ctx, stream, &ahpclient.Options{ClientID: "ahpd-automation-" + newID(), Versions: []string{"1.0.0"}})
	if err != nil {
		_ = stream.Close()
		return automations.Outcome{Err: err}
	}
	defer c.Close()
	session, err := r.createSession(ctx, c, req.Definition.Session)
	if err != nil {
		return automations.Outcome{Err: err}
	}
	req.SessionCreated(session)
	chat := protocol.DefaultChatURI(session)
	if _, err := c.Subscribe(ctx, chat); err != nil {
		return automations.Outcome{Err: fmt.Errorf("watch the run's chat: %w", err)}
	}
	turnID := "automation-" + newID()
	started := h.Now()
	err = c.DispatchWait(ctx, chat, &protocol.ChatTurnStartedAction{TurnID: turnID, StartedAt: protocol.FormatTime(started), Message: req.Definition.Message})
	var refused *ahpclient.RejectedError
	if errors.As(err, &refused) {
		return automations.Outcome{Err: fmt.Errorf("the message was refused: %s", refused.Reason)}
	}
	if err == nil {
		var st protocol.ChannelState
		if st, err = c.WaitState(ctx, chat, turnEnded(turnID)); err == nil {
			return automations.Outcome{Err: outcome(st.(*protocol.ChatState))}
		}
	}
	if ctx.Err() == nil {
		return automations.Outcome{Err: err}
	}
	// Cancelled: the turn goes with the run, and is given a moment to say
	// it ended.
	stop, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.Dispatch(stop, chat, &protocol.ChatTurnCancelledAction{TurnID: turnID, Duration: h.Now().Sub(started).Milliseconds()}); err == nil {
		_, _ = c.WaitState(stop, chat, turnEnded(turnID))
	}
	return automations.Outcome{Err: context.Cause(ctx)}
}

// createSession makes the run's session from the automation's template.
func (r runner) createSession(ctx context.Context, c *ahpclient.Client, tmpl protocol.AutomationSessionTemplate) (string, error) {
	// A template naming no provider runs on the host's default as it is
	// now: createSession picks it.
	session := protocol.NewSessionURI(newID()).String()
	create := protocol.CreateSessionParams{Channel: session, Provider: tmpl.Provider, WorkingDirectories: tmpl.WorkingDirectories, Config: tmpl.Config,
		Meta: protocol.Object{keepMeta: []byte("true")}} // listed as soon as made
	if err := c.Call(ctx, "createSession", create, nil); err != nil {
		return "", fmt.Errorf("create the run's session: %w", err)
	}
	return session, nil
}

// turnEnded says whether turn id has ended in a chat's state.
func turnEnded(id string) func(protocol.ChannelState) bool {
	return func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == id
	}
}

// outcome is how the chat's last turn ended, as a run's error.
func outcome(cs *protocol.ChatState) error {
	t := cs.Turns[len(cs.Turns)-1]
	switch t.State {
	case protocol.TurnStateComplete:
		return nil
	case protocol.TurnStateCancelled:
		return errors.New("the turn was cancelled")
	}
	if e := t.ErrorPart(); e != nil {
		return fmt.Errorf("the turn failed: %s", e.Error.Message)
	}
	return errors.New("the turn failed")
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
