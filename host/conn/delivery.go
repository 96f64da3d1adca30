package conn

import (
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/protocol"
)

// Delivery preferences: a subscription with delivery.maxLatencyMs m > 0
// lets the host hold the channel's streamed text up to m ms, from the
// first delta held, so that the deltas that follow merge into it
// (fanout.Coalescer says what is held and why order and every other
// channel's latency are kept). m is at most fanout.MaxLatency (1000 ms);
// more is taken as that. 0, or no delivery, is immediate delivery: the
// channel's frames go as they would without the option. A subscription
// again without it, or an unsubscribe, sends what is held and delivers at
// once from then on.
//
// The writer goroutine keeps the one timer, for the held frame's
// deadline, so nothing outlives the connection; the time is the
// connection's clock (Config.Clock), which tests move.

// DeliveryDelay reads a subscription's delivery preferences: how long its
// channel's text may be held.
func DeliveryDelay(d *protocol.SubscriptionDeliveryOptions) (time.Duration, error) {
	if d == nil || d.MaxLatencyMs == nil {
		return 0, nil
	}
	ms := *d.MaxLatencyMs
	if ms < 0 {
		return 0, protocol.Errorf(protocol.CodeInvalidParams, "delivery.maxLatencyMs is %d: it must be 0 (immediate delivery) or more", ms)
	}
	return time.Duration(min(ms, fanout.MaxLatency.Milliseconds())) * time.Millisecond, nil
}

// SetDelay records how long channel's text may be held for c: 0 sends
// what is held of it and delivers at once.
func (c *Conn) SetDelay(channel string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		c.undelayLocked(channel)
		return
	}
	if c.delay == nil {
		c.delay = map[string]time.Duration{}
	}
	c.delay[channel] = d
	c.delays.Store(true)
}

// undelayLocked ends channel's delay, sending what is held of it.
func (c *Conn) undelayLocked(channel string) {
	if _, ok := c.delay[channel]; !ok {
		return
	}
	delete(c.delay, channel)
	c.delays.Store(len(c.delay) > 0)
	if f := c.coalesce.FlushChannel(channel); f != nil {
		c.queueLocked(f)
	}
}

// heldAt returns the time to stamp a frame with, read before taking the
// connection's lock (no lock is taken under it, the clock's included):
// the zero time when no subscription of c allows a delay.
func (c *Conn) heldAt() time.Time {
	if !c.delays.Load() {
		return time.Time{}
	}
	return c.now()
}

// coalesceLocked offers f to what is held and queues what is to go now. It
// reports whether f is still to be queued. A frame held anew wakes the
// writer, to set its timer for it.
func (c *Conn) coalesceLocked(f *fanout.Frame, now time.Time) bool {
	before := c.coalesce.Deadline()
	first, then := c.coalesce.Offer(f, c.delay[f.Channel()], now)
	if first != nil {
		c.queueLocked(first)
	}
	if !c.coalesce.Deadline().Equal(before) {
		c.wakeLocked()
	}
	return then != nil
}

// sendDue queues the held frame when its deadline has come.
func (c *Conn) sendDue() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.finishing != "" {
		return
	}
	if f := c.coalesce.Due(now); f != nil {
		c.queueLocked(f)
	}
}

// heldTimer is the writer's timer for the held frame's deadline.
type heldTimer struct {
	at     time.Time
	c      <-chan time.Time // nil when no timer is set: a receive blocks
	cancel func()
}

// set makes the timer fire at at, or not at all when at is zero.
func (t *heldTimer) set(clk clock.Clock, at time.Time) {
	if at.Equal(t.at) {
		return
	}
	t.stop()
	if !at.IsZero() {
		t.at = at
		t.c, t.cancel = clk.At(at)
	}
}

// fired forgets a timer that has fired.
func (t *heldTimer) fired() { t.stop() }

// stop releases the timer.
func (t *heldTimer) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.at, t.c, t.cancel = time.Time{}, nil, nil
}
