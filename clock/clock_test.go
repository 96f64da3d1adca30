package clock

import (
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)

// fired reports whether ch has received, and what.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeFiresWhatIsDueInAdvance(t *testing.T) {
	c := NewFake(t0)
	early, _ := c.At(t0.Add(time.Second))
	late, _ := c.At(t0.Add(time.Minute))
	if _, ok := fired(early); ok {
		t.Fatal("a timer fired before the clock moved")
	}
	c.Advance(time.Second)
	if at, ok := fired(early); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("the timer due at +1s: fired %v at %v", ok, at)
	}
	if _, ok := fired(late); ok || c.Timers() != 1 {
		t.Errorf("the timer due at +1m fired at +1s (%d timers left)", c.Timers())
	}
	c.Advance(time.Hour)
	if at, ok := fired(late); !ok || !at.Equal(t0.Add(time.Hour+time.Second)) {
		t.Errorf("the timer due at +1m: fired %v at %v", ok, at)
	}
	if !c.Now().Equal(t0.Add(time.Hour + time.Second)) {
		t.Errorf("now = %v", c.Now())
	}
}

func TestFakeTimerInThePastFiresAtOnce(t *testing.T) {
	c := NewFake(t0)
	for _, at := range []time.Time{t0, t0.Add(-time.Hour)} {
		ch, stop := c.At(at)
		if got, ok := fired(ch); !ok || !got.Equal(t0) {
			t.Errorf("At(%v): fired %v at %v, want at once at now", at, ok, got)
		}
		stop()
	}
	if n := c.Timers(); n != 0 {
		t.Errorf("%d timers kept for times already reached", n)
	}
}

func TestFakeStoppedTimerNeverFires(t *testing.T) {
	c := NewFake(t0)
	ch, stop := c.At(t0.Add(time.Second))
	stop()
	stop() // twice is harmless
	c.Advance(time.Minute)
	if _, ok := fired(ch); ok || c.Timers() != 0 {
		t.Errorf("a stopped timer fired (%d timers)", c.Timers())
	}
}

func TestFakeRefusesToRunBackwards(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Advance(-1s) did not panic")
		}
	}()
	NewFake(t0).Advance(-time.Second)
}

func TestRealFires(t *testing.T) {
	var c Clock = Real{}
	ch, stop := c.At(c.Now().Add(time.Millisecond))
	defer stop()
	<-ch // the test's deadline bounds it
	past, stop2 := c.At(c.Now().Add(-time.Hour))
	defer stop2()
	<-past
}
