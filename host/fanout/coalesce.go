package fanout

import "time"

// Coalescing (AHP's subscribe option delivery.maxLatencyMs): a
// subscription may let the host delay its frames by up to a given time, so
// that a burst of streamed text goes out as one delta instead of hundreds.
// The client's reduced state is the same: the merged delta appends the same
// text to the same part, under the serverSeq of the last delta merged.
//
// A connection holds back at most one frame, the last it was given, and
// only while it is streamed text of a channel that allows a delay. Every
// other frame (an action of any kind, a delta of another part or of a
// channel that wants its frames at once, a notification, a response)
// sends the held frame first and is itself sent at once. Why only one, and
// only the last:
//
//   - Order. The connection's frames go out in the order it was given
//     them, which is serverSeq order across all of its channels. The held
//     frame is the newest, so nothing queued behind it has to wait for it,
//     and sending it before whatever comes next keeps the order whole.
//     Merging into an older frame would move text ahead of frames between
//     them, and serverSeq would go backwards.
//   - Latency. A connection with one channel coalescing and one that is
//     not never delays the second: its frame sends the held one and goes
//     at once. The held frame waits no longer than its own channel's
//     delay, counted from when it was first held, and since at most one
//     frame is held, the connection's held text goes out no later than
//     the smallest delay among its subscriptions with text waiting: the
//     rule a connection with several coalescing channels needs.
//
// The cost of the rule is less merging where a connection's channels
// interleave their deltas (two chats streaming at once): each sends the
// other's, and the connection gets what it would without the option.

// MaxLatency is the longest a frame is held. A subscription asking for
// more is given this: a second is already longer than a person waits
// for text to move, and a longer hold only grows what is held.
const MaxLatency = time.Second

// maxHeldBytes bounds the text merged into the held frame: past it the
// frame is sent and the next delta begins another.
const maxHeldBytes = 64 << 10

// A Coalescer holds back one connection's streamed text (see above). It
// belongs to the connection and is used under its lock; it reads no clock
// and sets no timer: the caller says what time it is, and sends the held
// frame at Deadline (Due).
type Coalescer struct {
	held *Frame
	due  time.Time
}

// Offer takes the next frame for the connection, the delay its channel's
// subscription allows (0: none) and the time. It returns what to queue
// now, in this order: first, the frame held until now, when f cannot join
// it; then f, unless f is held, alone or merged into the held frame. A
// zero now holds nothing: the caller did not read the clock.
func (c *Coalescer) Offer(f *Frame, delay time.Duration, now time.Time) (first, then *Frame) {
	if c.held != nil {
		if n, ok := Mergeable(c.held, f); ok && delay > 0 && c.held.Len()+n <= maxHeldBytes {
			c.held = Merge(c.held, f)
			return nil, nil
		}
		first = c.Flush()
	}
	if delay <= 0 || f.text == nil || now.IsZero() {
		return first, f
	}
	c.held, c.due = f, now.Add(min(delay, MaxLatency))
	return first, nil
}

// Deadline returns when the held frame is to be sent, or the zero time
// when none is held.
func (c *Coalescer) Deadline() time.Time { return c.due }

// Due returns the held frame, no longer held, when its deadline has come
// by now; else nil.
func (c *Coalescer) Due(now time.Time) *Frame {
	if c.held == nil || now.Before(c.due) {
		return nil
	}
	return c.Flush()
}

// Flush returns the held frame, no longer held, or nil.
func (c *Coalescer) Flush() *Frame {
	f := c.held
	c.held, c.due = nil, time.Time{}
	return f
}

// FlushChannel returns the held frame, no longer held, when it is of
// channel (its subscription ends or stops allowing a delay); else nil.
func (c *Coalescer) FlushChannel(channel string) *Frame {
	if c.held == nil || c.held.channel != channel {
		return nil
	}
	return c.Flush()
}
