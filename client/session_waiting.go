package client

import (
	"context"
	"errors"
	"slices"

	"github.com/ahpd/ahpd/protocol"
)

// Watch subscribes to uri unless the client already follows it, and
// returns its state.
func (c *Client) Watch(ctx context.Context, uri string) (protocol.ChannelState, error) {
	if st := c.State(uri); st != nil {
		return st, nil
	}
	return c.Subscribe(ctx, uri)
}

// SessionWaiting lists what the running turns of session's chats wait on
// a person for: the chats its state says wait on somebody (inputNeeded),
// each read from the chat itself, which the client subscribes to.
func (c *Client) SessionWaiting(ctx context.Context, session string) ([]Waiting, error) {
	st, err := c.Watch(ctx, session)
	if err != nil {
		return nil, err
	}
	ss, _ := st.(*protocol.SessionState)
	if ss == nil {
		return nil, nil
	}
	var chats []string
	for _, r := range ss.InputNeeded {
		if _, chat := protocol.InputRequestOf(r); chat != "" && !slices.Contains(chats, chat) {
			chats = append(chats, chat)
		}
	}
	var out []Waiting
	for _, chat := range chats {
		cst, err := c.Watch(ctx, chat)
		if err != nil {
			return nil, err
		}
		cs, _ := cst.(*protocol.ChatState)
		out = append(out, WaitingIn(cs)...)
	}
	return out, nil
}

// FindIn looks for the question or tool call id among session's chats
// (Find): first the chat its state says waits on it, then the default
// chat, then the others. The client subscribes to those it reads.
func (c *Client) FindIn(ctx context.Context, session, id string) (Waiting, Found, error) {
	st, err := c.Watch(ctx, session)
	if err != nil {
		return Waiting{}, NotFound, err
	}
	ss, _ := st.(*protocol.SessionState)
	if ss == nil {
		return Waiting{}, NotFound, nil
	}
	var chats []string
	add := func(chat string) {
		if chat != "" && !slices.Contains(chats, chat) {
			chats = append(chats, chat)
		}
	}
	for _, r := range ss.InputNeeded {
		if rid, chat := protocol.InputRequestOf(r); rid == id {
			add(chat)
		}
	}
	if ss.DefaultChat != nil {
		add(*ss.DefaultChat)
	} else {
		add(protocol.DefaultChatURI(session))
	}
	for _, ch := range ss.Chats {
		add(ch.Resource)
	}
	for _, chat := range chats {
		cst, err := c.Watch(ctx, chat)
		if err != nil {
			return Waiting{}, NotFound, err
		}
		cs, _ := cst.(*protocol.ChatState)
		if w, found := Find(cs, id); found != NotFound {
			return w, found, nil
		}
	}
	return Waiting{}, NotFound, nil
}

// The errors of Respond when the turn moved on before the answer came.
var (
	// ErrSettled: somebody answered it (or approved or denied the tool
	// call) first.
	ErrSettled = errors.New("it was answered already")
	// ErrTurnEnded: the turn that asked it has ended.
	ErrTurnEnded = errors.New("the turn that asked it has ended")
)

// Respond dispatches act, the answer to w (Accept, Decline, Confirm), on
// w's chat and waits for the host to take it. When the host refuses it
// because the turn moved on meanwhile, the error is (wraps) ErrSettled or
// ErrTurnEnded; any other refusal is the host's *RejectedError (a grant
// the person lacks, say).
func (c *Client) Respond(ctx context.Context, w Waiting, act protocol.Action) error {
	err := c.DispatchWait(ctx, w.Chat, act)
	var rej *RejectedError
	if !errors.As(err, &rej) {
		return err
	}
	// The change that made the answer moot reached this client before
	// the refusal did: the chat's state tells which it was.
	cs, _ := c.State(w.Chat).(*protocol.ChatState)
	switch _, found := Find(cs, w.ID); found {
	case FoundSettled:
		return ErrSettled
	case FoundEnded:
		return ErrTurnEnded
	}
	return err
}
