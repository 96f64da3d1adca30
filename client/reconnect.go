package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ahpd/ahpd/protocol"
)

// Reconnect replaces the connection with a new one and brings every
// watched channel up to date. It sends AHP reconnect with the last
// serverSeq seen: the host replays what the channels missed, which is
// applied to their states and delivered as events, or sends fresh
// snapshots. Channels the host no longer has are forgotten. A host that
// does not know the client any more (-32008: it restarted, or the client
// was away too long) is initialized anew and each channel subscribed to
// again. A connection still up is closed first.
func (c *Client) Reconnect(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	old := c.conn
	c.mu.Unlock()
	old.close()
	if err := c.connect(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	subs := make([]string, 0, len(c.channels))
	for uri := range c.channels {
		subs = append(subs, uri)
	}
	lastSeen := c.lastSeq
	c.mu.Unlock()

	_, err := c.rejoin(ctx, lastSeen, subs)
	if ErrorCode(err) == protocol.CodeNotFound {
		c.log.Debug("the host does not know this client: initializing anew", "client", c.opts.ClientID)
		return c.fresh(ctx, subs)
	}
	return err
}

// rejoin sends AHP reconnect on the current connection and reports
// whether the host replayed what subs missed after lastSeen (else it sent
// snapshots).
func (c *Client) rejoin(ctx context.Context, lastSeen int64, subs []string) (bool, error) {
	params := protocol.ReconnectParams{ClientID: c.opts.ClientID, LastSeenServerSeq: lastSeen, Subscriptions: subs}
	var raw json.RawMessage
	if err := c.call(ctx, "reconnect", params, &raw, c.takeReconnect); err != nil {
		return false, fmt.Errorf("reconnect: %w", err)
	}
	r, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		return false, fmt.Errorf("reconnect: %w", err)
	}
	_, replayed := r.(*protocol.ReconnectReplayResult)
	return replayed, nil
}

// SnapshotReason is why the host sent the last reconnect snapshots rather
// than what the client missed, as ahpd says it (too_far_behind,
// not_replayable), or "" when it replayed or did not say.
func (c *Client) SnapshotReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapReason
}

// Resume speaks AHP over rwc, as Open does, for a client the host already
// knows (opts.ClientID, initialized on an earlier connection by the same
// person): instead of initialize it sends reconnect with lastSeen and
// channels. When the host still holds what those channels changed after
// lastSeen, it replays it (delivered on Events, in order, before anything
// newer) and Resume reports true; otherwise it sends their snapshots,
// which State returns. A host that does not know the client answers
// -32008 (an *Error). ctx bounds the handshake only.
func Resume(ctx context.Context, rwc io.ReadWriteCloser, opts *Options, lastSeen int64, channels []string) (*Client, bool, error) {
	c := newClient("", opts)
	c.dial = streamDialer(c, rwc)
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, false, err
	}
	replayed, err := c.rejoin(ctx, lastSeen, channels)
	if err != nil {
		c.Close()
		return nil, false, err
	}
	return c, replayed, nil
}

// Adopt takes over what from holds of the host: the version it speaks, the
// clientSeqs it used, the last serverSeq it saw, the channels it watches
// and their states, replacing what the client held. A program's new connection carries on
// from its old one so, before it reconnects as it (Connect, then Call
// reconnect with from's LastSeq and Channels): what the host replays is
// applied to the states from had. from is not changed, and may be
// closed.
func (c *Client) Adopt(from *Client) {
	from.mu.Lock()
	version, lastSeq, clientSeq := from.version, from.lastSeq, from.clientSeq
	channels := make(map[string]*channel, len(from.channels))
	for uri, ch := range from.channels {
		copied := *ch
		channels[uri] = &copied
	}
	from.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.signalLocked()
	c.version, c.lastSeq, c.channels = version, lastSeq, channels
	// A reconnect carries the client's numbering on: the host takes each
	// clientSeq of it once.
	c.clientSeq = max(c.clientSeq, clientSeq)
}

// takeReconnect applies a reconnect's answer, in the reader, before any
// action that follows it.
func (c *Client) takeReconnect(raw json.RawMessage) {
	r, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		c.log.Debug("a reconnect result that does not decode", "err", err)
		return
	}
	c.snapReason = ""
	switch r := r.(type) {
	case *protocol.ReconnectReplayResult:
		for i := range r.Actions {
			env := &r.Actions[i]
			c.applyLocked(env)
			c.emitLocked(Event{Method: "action", Action: env})
		}
		for _, uri := range r.Missing {
			delete(c.channels, uri)
		}
	case *protocol.ReconnectSnapshotResult:
		kept := make(map[string]*channel, len(r.Snapshots))
		for _, s := range r.Snapshots {
			kept[s.Resource] = &channel{state: s.State, fromSeq: s.FromSeq}
		}
		c.channels = kept
		var why struct {
			Meta struct {
				Reason string `json:"ahpd.reason"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(raw, &why) // a result without it says nothing
		c.snapReason = why.Meta.Reason
	}
}

// fresh initializes as a new client would and subscribes to subs again:
// every state is a new snapshot. Channels that cannot be subscribed to
// any more are forgotten.
func (c *Client) fresh(ctx context.Context, subs []string) error {
	c.mu.Lock()
	c.channels = map[string]*channel{}
	c.mu.Unlock()
	if err := c.initialize(ctx, []string{protocol.RootURI}); err != nil {
		return err
	}
	for _, uri := range subs {
		if uri == protocol.RootURI {
			continue
		}
		if _, err := c.Subscribe(ctx, uri); err != nil {
			if code := ErrorCode(err); code == 0 {
				return err
			}
			c.log.Debug("a channel is gone after reconnecting", "channel", uri, "err", err)
		}
	}
	return nil
}
