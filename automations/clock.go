package automations

import (
	"time"

	"github.com/ahpd/ahpd/clock"
)

// Clock is where the engine reads the time and waits for it: package
// clock's. Timers are set for an absolute time, so a clock moved between
// reading Now and setting the timer cannot push the deadline later.
type Clock = clock.Clock

// RealClock is the wall clock.
type RealClock = clock.Real

// FakeClock is a clock that moves only when told to, for tests: Advance
// fires every timer whose time has come.
type FakeClock = clock.Fake

// NewFakeClock returns a fake clock reading now.
func NewFakeClock(now time.Time) *FakeClock { return clock.NewFake(now) }
