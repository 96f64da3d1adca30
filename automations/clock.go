package automations

import (
	"sort"
	"sync"
	"time"
)

// Clock is where the engine reads the time and waits for it. Timers are
// set for an absolute time, so a clock moved between reading Now and
// setting the timer cannot push the deadline later.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the clock reaches t, and a
	// stop function that releases the timer.
	At(t time.Time) (<-chan time.Time, func())
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// At fires at t by the wall clock.
func (RealClock) At(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}

// FakeClock is a clock that moves only when told to, for tests: Advance
// fires every timer whose time has come.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock returns a fake clock reading now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives when Advance reaches t; at once when
// t is not after now.
func (c *FakeClock) At(t time.Time) (<-chan time.Time, func()) {
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

func (c *FakeClock) stop(ft *fakeTimer) {
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
// earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	c.timers = kept
}
