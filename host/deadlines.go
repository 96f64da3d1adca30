package host

import (
	"context"
	"fmt"
	"time"
)

// finishTime is how long shutdown waits for connections to answer what
// they took and write their last words before it cuts them.
const finishTime = 3 * time.Second

// tick is how often the watchdog looks at deadlines: often enough that
// none is overrun by more than a quarter, at most once a second.
func (l Limits) tick() time.Duration {
	t := time.Second
	for _, d := range []time.Duration{l.Initialize, l.Idle, l.Lifetime} {
		if on(d) {
			t = min(t, d/4)
		}
	}
	return max(t, 5*time.Millisecond)
}

// check ends the connection if it is past a deadline or its write has
// stalled, and pings a quiet client. The host's own connection has no
// deadlines.
func (c *conn) check(now time.Time) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		// Cut or ending already: a connection whose peer is slow to
		// close is looked at again each tick until it is gone, and must
		// be counted once.
		return
	}
	if c.stuck(now, writeTimeout) {
		c.h.metrics.cutFor(cutStalled)
		c.cut(closePolicy, "write timed out: the client stopped reading")
		return
	}
	if c.stdio {
		return
	}
	l := c.limits
	age := now.Sub(c.started)
	quiet := now.Sub(time.Unix(0, c.heard.Load()))
	switch {
	case on(l.Initialize) && age > l.Initialize && !c.initialized():
		c.deadline(fmt.Sprintf("no initialize in %s", l.Initialize))
	case on(l.Lifetime) && age > l.Lifetime:
		c.deadline(fmt.Sprintf("the connection is %s old, the most it may be: reconnect", l.Lifetime))
	case !on(l.Idle) || c.line.busy():
		// A client waiting on its requests is not idle.
	case quiet > l.Idle:
		c.deadline(fmt.Sprintf("nothing heard from the client in %s", l.Idle))
	case quiet > l.Idle/2:
		c.ping(l.Idle / 2)
	}
}

func (c *conn) deadline(why string) {
	c.h.metrics.cutFor(cutDeadline)
	c.cut(closePolicy, why)
}

// cut aborts the connection and logs why.
func (c *conn) cut(code closeCode, why string) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.log.Info("connection cut", "client", c.client(), "code", int(code), "why", why)
	c.abort(code, why)
}

// pinger is a transport that can ask its peer for a sign of life.
type pinger interface {
	ping(ctx context.Context) error
}

// ping asks a quiet client for a sign of life, once at a time: its
// answer counts as hearing from it.
func (c *conn) ping(wait time.Duration) {
	p, ok := c.t.(pinger)
	if !ok || !c.pinging.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.pinging.Store(false)
		ctx, cancel := context.WithTimeout(c.ctx, wait)
		defer cancel()
		if p.ping(ctx) == nil {
			c.heard.Store(c.h.now().UnixNano())
		}
	}()
}

// endConnections finishes every connection: none takes a request more,
// those taken are answered and what is queued is written. One not done in
// finishTime is cut.
func (h *Host) endConnections() {
	conns := h.connList()
	for _, c := range conns {
		c.drainInput("ahpd is shutting down")
	}
	late := time.NewTimer(finishTime)
	defer late.Stop()
	for _, c := range conns {
		select {
		case <-c.done:
		case <-late.C:
			late.Reset(0)
			h.metrics.cutFor(cutShutdown)
			c.cut(closePolicy, "ahpd is shutting down")
		}
	}
}
