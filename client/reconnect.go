package client

import (
	"context"
	"encoding/json"
	"fmt"

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

	params := protocol.ReconnectParams{ClientID: c.opts.ClientID, LastSeenServerSeq: lastSeen, Subscriptions: subs}
	err := c.call(ctx, "reconnect", params, nil, c.takeReconnect)
	if ErrorCode(err) == protocol.CodeNotFound {
		c.log.Debug("the host does not know this client: initializing anew", "client", c.opts.ClientID)
		return c.fresh(ctx, subs)
	}
	if err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	return nil
}

// takeReconnect applies a reconnect's answer, in the reader, before any
// action that follows it.
func (c *Client) takeReconnect(raw json.RawMessage) {
	r, err := protocol.UnmarshalReconnectResult(raw)
	if err != nil {
		c.log.Debug("a reconnect result that does not decode", "err", err)
		return
	}
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
