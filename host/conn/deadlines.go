package conn

import (
	"context"
	"fmt"
	"time"
)

// Tick is how often the watchdog looks at deadlines: often enough that
// none is overrun by more than a quarter, at most once a second.
func (l Limits) Tick() time.Duration {
	t := time.Second
	for _, d := range []time.Duration{l.Initialize, l.Idle, l.Lifetime} {
		if on(d) {
			t = min(t, d/4)
		}
	}
	return max(t, 5*time.Millisecond)
}

// Check ends the connection if it is past a deadline or its write has
// stalled, and pings a quiet client. The host's own connection has no
// deadlines.
func (c *Conn) Check(now time.Time) {
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
		c.cutFor(CutStalled)
		c.Cut(ClosePolicy, "write timed out: the client stopped reading")
		return
	}
	if c.stdio {
		return
	}
	l := c.limits
	age := now.Sub(c.started)
	quiet := now.Sub(time.Unix(0, c.heard.Load()))
	switch {
	case on(l.Initialize) && age > l.Initialize && !c.Initialized():
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

func (c *Conn) deadline(why string) {
	c.cutFor(CutDeadline)
	c.Cut(ClosePolicy, why)
}

// Cut aborts the connection and logs why.
func (c *Conn) Cut(code CloseCode, why string) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.log.Info("connection cut", "client", c.Client(), "code", int(code), "why", why)
	c.Abort(code, why)
}

// ping asks a quiet client for a sign of life, once at a time: its
// answer counts as hearing from it.
func (c *Conn) ping(wait time.Duration) {
	p, ok := c.t.(Pinger)
	if !ok || !c.pinging.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.pinging.Store(false)
		ctx, cancel := context.WithTimeout(c.ctx, wait)
		defer cancel()
		if p.Ping(ctx) == nil {
			c.heard.Store(c.now().UnixNano())
		}
	}()
}
