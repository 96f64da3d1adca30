package conn

import (
	"context"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// line orders a connection's requests: each waits for the one before. It
// counts those taken and not done, for recv to take no more while it is
// full: counted as recv takes them, not as jrpc2 assigns them, for jrpc2
// reads ahead of what it has assigned.
type line struct {
	mu   lockcheck.Mutex
	last chan struct{}
	n    int           // requests in line
	peak int           // the most there have been, for tests
	left chan struct{} // closed when one leaves, for room to wait on
}

// next returns the channel closed when the request before is done, and
// the one to close when this one is.
func (l *line) next() (turn <-chan struct{}, done chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.last
	if prev == nil {
		prev = make(chan struct{})
		close(prev)
	}
	l.last = make(chan struct{})
	return prev, l.last
}

// take counts k requests taken off the transport: each will take its
// place in line, as admit made sure.
func (l *line) take(k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += k
	l.peak = max(l.peak, l.n)
}

// leave ends a request's turn.
func (l *line) leave(done chan struct{}) {
	close(done)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.left != nil {
		close(l.left)
		l.left = nil
	}
}

// room waits until fewer than max requests are in line, or stop is
// closed, or ctx ends.
func (l *line) room(ctx context.Context, stop <-chan struct{}, max int) error {
	for {
		l.mu.Lock()
		if l.n < max {
			l.mu.Unlock()
			return nil
		}
		if l.left == nil {
			l.left = make(chan struct{})
		}
		left := l.left
		l.mu.Unlock()
		select {
		case <-left:
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// busy reports whether requests are in line.
func (l *line) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n > 0
}

// PeakInLine is the most requests the connection has had in line at once.
func (c *Conn) PeakInLine() int {
	c.line.mu.Lock()
	defer c.line.mu.Unlock()
	return c.line.peak
}
