package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Subscribe watches a channel and returns its snapshot. From then on the
// client keeps its state (State, WaitState).
func (c *Client) Subscribe(ctx context.Context, uri string) (protocol.ChannelState, error) {
	var res protocol.SubscribeResult
	err := c.call(ctx, "subscribe", protocol.SubscribeParams{Channel: uri}, &res, func(raw json.RawMessage) {
		var r protocol.SubscribeResult
		if json.Unmarshal(raw, &r) == nil && r.Snapshot != nil {
			c.channels[uri] = &channel{state: r.Snapshot.State, fromSeq: r.Snapshot.FromSeq}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", uri, err)
	}
	if res.Snapshot == nil {
		return nil, fmt.Errorf("subscribing to %s: the host sent no snapshot", uri)
	}
	return res.Snapshot.State, nil
}

// takeSubscribe takes the answer to a subscribe the client did not make
// itself (Call): the channel is the one the snapshot names.
func (c *Client) takeSubscribe(raw json.RawMessage) {
	var r protocol.SubscribeResult
	if json.Unmarshal(raw, &r) == nil && r.Snapshot != nil {
		c.channels[r.Snapshot.Resource] = &channel{state: r.Snapshot.State, fromSeq: r.Snapshot.FromSeq}
	}
}

// Unsubscribe stops watching a channel and forgets its state.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	c.mu.Lock()
	delete(c.channels, uri)
	c.mu.Unlock()
	if err := c.Call(ctx, "unsubscribe", protocol.UnsubscribeParams{Channel: uri}, nil); err != nil {
		return fmt.Errorf("unsubscribing from %s: %w", uri, err)
	}
	return nil
}

// Channels returns the channels the client watches.
func (c *Client) Channels() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.channels))
	for uri := range c.channels {
		out = append(out, uri)
	}
	return out
}

// State returns the current state of a watched channel, or nil. The
// value is shared and must not be modified: the reducers never modify a
// state, they return a new one.
func (c *Client) State(uri string) protocol.ChannelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.channels[uri]; ch != nil {
		return ch.state
	}
	return nil
}

// WaitState waits until cond holds for a watched channel's state and
// returns that state. It fails when ctx ends, when the channel is not (or
// no longer) watched, and when the connection ends.
func (c *Client) WaitState(ctx context.Context, uri string, cond func(protocol.ChannelState) bool) (protocol.ChannelState, error) {
	for {
		c.mu.Lock()
		var state protocol.ChannelState
		if ch := c.channels[uri]; ch != nil {
			state = ch.state
		}
		changed, closed, cn := c.changed, c.closed, c.conn
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if state == nil {
			return nil, fmt.Errorf("%s is not watched: subscribe to it first", uri)
		}
		if cond(state) {
			return state, nil
		}
		select {
		case <-cn.done:
			return nil, fmt.Errorf("waiting on %s: %w: %v", uri, ErrDisconnected, cn.err)
		default:
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Changed returns a channel closed when anything next arrives from the
// host (an action, a notification, an answer) or the connection ends:
// a caller drawing the states redraws then.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// RejectedError is a client action the host refused.
type RejectedError struct {
	Channel string
	Type    protocol.ActionType
	Reason  string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%s refused: %s", e.Type, e.Reason)
}

// Dispatched is a client action sent.
type Dispatched struct {
	c       *Client
	Seq     int64 // its clientSeq
	channel string
	echo    chan error
}

// Dispatch sends a client action on a channel (dispatchAction). The host
// echoes it to the channel's subscribers, or back to this client alone
// with a reason when it refuses it: Wait on the result to know which.
func (c *Client) Dispatch(ctx context.Context, uri string, a protocol.Action) (*Dispatched, error) {
	c.mu.Lock()
	c.clientSeq++
	seq := c.clientSeq
	d := &Dispatched{c: c, Seq: seq, channel: uri}
	if c.channels[uri] != nil {
		d.echo = make(chan error, 1)
		c.echoes[seq] = d.echo
	}
	c.mu.Unlock()
	err := c.Notify(ctx, "dispatchAction", protocol.DispatchActionParams{Channel: uri, ClientSeq: seq, Action: a})
	if err != nil {
		c.forgetEcho(seq)
		return nil, fmt.Errorf("dispatching %s: %w", a.Type(), err)
	}
	return d, nil
}

func (c *Client) forgetEcho(seq int64) {
	c.mu.Lock()
	delete(c.echoes, seq)
	c.mu.Unlock()
}

// Wait waits for the host's echo of the action: nil when it was taken, a
// *RejectedError when it was refused. The host echoes only to
// subscribers, so Wait needs the channel to have been watched when the
// action was sent.
func (d *Dispatched) Wait(ctx context.Context) error {
	if d.echo == nil {
		return fmt.Errorf("%s is not watched: the host echoes actions only to subscribers", d.channel)
	}
	d.c.mu.Lock()
	cn := d.c.conn
	d.c.mu.Unlock()
	select {
	case err := <-d.echo:
		return err
	case <-cn.done:
		d.c.forgetEcho(d.Seq)
		return fmt.Errorf("%w: %v", ErrDisconnected, cn.err)
	case <-ctx.Done():
		d.c.forgetEcho(d.Seq)
		return ctx.Err()
	}
}

// DispatchWait is Dispatch then Wait.
func (c *Client) DispatchWait(ctx context.Context, uri string, a protocol.Action) error {
	d, err := c.Dispatch(ctx, uri, a)
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// applyLocked brings a channel's state up to date with an envelope: after
// its snapshot, in serverSeq order; refused actions change nothing.
func (c *Client) applyLocked(env *protocol.ActionEnvelope) {
	if o := env.Origin; o != nil && o.ClientID == c.opts.ClientID {
		if ch, ok := c.echoes[o.ClientSeq]; ok {
			delete(c.echoes, o.ClientSeq)
			if env.RejectionReason != nil {
				ch <- &RejectedError{Channel: env.Channel, Type: env.Action.Type(), Reason: *env.RejectionReason}
			} else {
				ch <- nil
			}
		}
	}
	if env.RejectionReason != nil {
		return
	}
	c.lastSeq = max(c.lastSeq, env.ServerSeq)
	ch := c.channels[env.Channel]
	if ch == nil || env.ServerSeq <= ch.fromSeq {
		return // not watched, or already in the snapshot
	}
	ch.state = protocol.Apply(ch.state, env.Action)
}

// DecodeEnvelope reads an action notification's params as the client
// does, for a caller reading the wire itself (Options.Received). A
// refusal carries the client's action back as it came (or its type
// alone, when it was large), which need not decode: it reads as an
// envelope whose action is a protocol.Unknown.
func DecodeEnvelope(params json.RawMessage) (*protocol.ActionEnvelope, error) {
	var env protocol.ActionEnvelope
	err := json.Unmarshal(params, &env)
	if err == nil {
		return &env, nil
	}
	var raw struct {
		Channel         string                 `json:"channel"`
		Action          json.RawMessage        `json:"action"`
		ServerSeq       int64                  `json:"serverSeq"`
		Origin          *protocol.ActionOrigin `json:"origin"`
		RejectionReason *string                `json:"rejectionReason"`
	}
	if json.Unmarshal(params, &raw) != nil || raw.RejectionReason == nil {
		return nil, err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw.Action, &head)
	return &protocol.ActionEnvelope{Channel: raw.Channel, ServerSeq: raw.ServerSeq, Origin: raw.Origin,
		RejectionReason: raw.RejectionReason, Action: &protocol.Unknown{Kind: head.Type, Raw: []byte(raw.Action)}}, nil
}

// Now returns the current time as the protocol spells it, for actions
// that carry a start time (chat/turnStarted).
func Now() string { return protocol.FormatTime(time.Now()) }
