package conn

import (
	"context"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
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

// TestStallByItsClock: a write under way is judged stalled by the
// connection's clock, the one its deadlines are checked at; a clock far
// from the wall clock (a test's) does not make a write that just began
// look stalled.
func TestStallByItsClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	d := &gateWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	cuts := newTestBus()
	c := New(context.Background(), Config{ID: 1, Transport: d, Clock: clk, OnCut: cuts.cut, Limits: Limits{Idle: -1, Initialize: -1}})
	t.Cleanup(func() {
		c.Abort(CloseNormal, "the test is over")
		<-c.Done()
	})
	c.respond([]byte(`{"jsonrpc":"2.0","id":1,"result":null}`))
	<-d.entered // the writer is in its write, held
	c.Check(clk.Now())
	if _, why, ended := c.Ended(); ended {
		t.Fatalf("a write that just began was cut: %s", why)
	}
	clk.Advance(writeTimeout + time.Second)
	c.Check(clk.Now())
	if code, _, ended := c.Ended(); !ended || code != ClosePolicy || cuts.cuts[CutStalled].Load() != 1 {
		t.Fatalf("a write stalled past writeTimeout: ended %v with %d", ended, code)
	}
	close(d.release)
}

// gateWriter is a transport whose writes say they began and then wait to
// be let go, or for the connection's end.
type gateWriter struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gateWriter) Read(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (g *gateWriter) Write(ctx context.Context, msg []byte) error {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gateWriter) Close(CloseCode, string) error { return nil }
