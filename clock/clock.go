// Package clock is where code that waits on time reads it, so that tests
// can move time themselves instead of sleeping: Real is the wall clock,
// Fake moves only when a test advances it and then fires, at once, every
// timer that has come due.
//
// It owns reading the time and timers for an absolute time, nothing more:
// it starts no goroutine and schedules no work of its own.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is where code reads the time and waits for it. Timers are set for
// an absolute time, so a clock moved between reading Now and setting the
// timer cannot push the deadline later.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the clock reaches t (at
	// once when t is not after Now), and a stop function that releases
	// the timer. The channel is buffered: a timer nobody reads blocks
	// nothing.
	At(t time.Time) (<-chan time.Time, func())
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now.
func (Real) Now() time.Time { return time.Now() }

// At fires at t by the wall clock.
func (Real) At(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}

// Fake is a clock that moves only when told to, for tests. Its timers fire
// inside Advance, so once Advance returns every timer due by then has
// sent; what the code waiting on it does next is the test's to wait for.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

var _ Clock = (*Fake)(nil)

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives when Advance reaches t; at once when
// t is not after now.
func (c *Fake) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{at: t, ch: make(chan time.Time, 1)}
	if !t.After(c.now) {
		ft.ch <- c.now
		return ft.ch, func() {}
	}
	c.timers = append(c.timers, ft)
	return ft.ch, func() { c.stop(ft) }
}

func (c *Fake) stop(ft *fakeTimer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.timers {
		if t == ft {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock on by d and fires the timers due by then, the
// earliest first. A negative d is refused with a panic: time that runs
// backwards is a broken test.
func (c *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Advance by a negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Timers reports how many timers are set and not yet fired or stopped.
func (c *Fake) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
