package host

import (
	"context"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

func (h *Host) subscribe(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.SubscribeParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	delay, err := conn.DeliveryDelay(p.Delivery)
	if err != nil {
		return nil, err
	}
	turns, err := session.ViewTurns(p.View)
	if err != nil {
		return nil, err
	}
	snap, err := h.attach(ctx, c, p.Channel, req.ID(), turns)
	if err != nil {
		return nil, err
	}
	c.SetReadOnly(p.Channel, p.Meta)
	c.SetDelay(p.Channel, delay)
	return &protocol.SubscribeResult{Snapshot: &snap}, nil
}

func (h *Host) unsubscribe(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.UnsubscribeParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	h.bus.Unsubscribe(c, p.Channel)
	c.Forget(p.Channel)
	h.poke()
	return nil, nil
}

// exists reports whether c may subscribe to channel, under the URI it
// names: a session named in its other form is not the one subscribed.
func (h *Host) exists(c *conn.Conn, uri string) bool {
	if isAutomationChannel(uri) {
		return h.automationExists(c, uri)
	}
	ch, err := h.resolve(c, uri)
	if sc, ok := ch.(sessionChannel); ok {
		return sc.s.URI() == uri
	}
	return err == nil
}

// attach subscribes c to a channel and returns its snapshot: of a chat,
// with its last turns finished turns only when turns > 0 (view.go); other
// channels hold no turns and ignore it.
func (h *Host) attach(ctx context.Context, c *conn.Conn, uri, requestID string, turns int) (protocol.Snapshot, error) {
	if err := c.RoomToWatch(uri); err != nil {
		return protocol.Snapshot{}, err
	}
	if isAutomationChannel(uri) {
		return h.attachAutomation(c, uri, requestID)
	}
	ch, err := h.resolve(c, uri)
	if err != nil {
		return protocol.Snapshot{}, err
	}
	if cc, ok := ch.(chatChannel); ok {
		return cc.attachView(ctx, c, requestID, turns)
	}
	return ch.attach(ctx, c, requestID)
}
