package conn

import (
	"testing"
	"time"
)

// TestCutCountedOnce checks a connection past its deadline is counted
// once, however often the watchdog looks at it before it is gone: a peer
// that does not answer the close keeps it for seconds.
func TestCutCountedOnce(t *testing.T) {
	h := newTestBus()
	conns, _ := subscribers(t, h, "ahp-session:/s", 1)
	late := time.Now().Add(time.Hour) // past every deadline
	for range 3 {
		conns[0].Check(late)
	}
	if n := h.cuts[CutDeadline].Load(); n != 1 {
		t.Errorf("one connection past its deadline counted %d times", n)
	}
}
