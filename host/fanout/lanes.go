package fanout

import (
	"slices"
)

// Lanes: a batch reserved (numbered, then written down, then released)
// holds back only what the subscribers of its lanes are sent after it.
//
// serverSeq is host-wide and a client must see it only rise, and never
// miss a change numbered before one it was sent (its reconnect says "I
// have everything up to N"). Holding everything numbered after a batch
// until the batch goes keeps both, but makes every session wait for the
// slowest write of any (head-of-line blocking: one session streaming
// faster than the journal takes it delays every other's actions by the
// whole backlog). A subscriber needs only what it watches in order: a
// frame numbered q goes to it as soon as no batch numbered before q is
// held in a lane it watches. Until then the frame waits in the
// subscriber's backlog here, in serverSeq order, and goes once the batch
// ahead of it is released.
//
// A lane is a group of channels written down together (a session's and
// its chats', root's): laneOf names it. Any function of the channel is
// correct, as a batch's lanes and a subscriber's are both read through
// it; a coarser one only holds more.

// maxBacklog is how many frames a subscriber may have held back behind a
// batch of another lane before it counts as too far behind: its lanes'
// writes are stuck while others' go on.
const maxBacklog = 1 << 16

// A lane's batches reserved and not yet let go, oldest first; a batch
// released behind one still held stays until that one goes.
type lane struct {
	held []*Batch
}

// first is the serverSeq of the oldest change the lane holds back.
func (l *lane) first() int64 { return l.held[0].envs[0].ServerSeq }

// A member is a subscriber as the bus keeps it: how many of the channels
// it watches are in each lane, and the frames held back for it.
type member struct {
	s       Subscriber
	lanes   map[string]int
	backlog []pending // by key
	waiting string    // the lane whose batch the backlog's first waits for
	behind  bool      // its backlog overflowed: it is dropped (flushLocked)
}

// pending is a frame held back for a subscriber, at its key: 2×serverSeq
// for a change, 2×serverSeq+1 for an echo or a notification sent after
// the change numbered serverSeq.
type pending struct {
	key int64
	f   *Frame
}

// A laneWait is a caller waiting for its lanes to have sent everything
// numbered up to upTo.
type laneWait struct {
	lanes []string
	upTo  int64
	done  chan struct{}
}

// laneLocked returns a channel's lane, asking laneOf once per channel.
func (b *Bus) laneLocked(channel string) string {
	if l, ok := b.laneFor[channel]; ok {
		return l
	}
	if len(b.laneFor) >= 1<<16 {
		clear(b.laneFor) // channels of sessions long gone; asked again
	}
	l := b.laneOf(channel)
	b.laneFor[channel] = l
	return l
}

// memberLocked returns s as the bus keeps it.
func (b *Bus) memberLocked(s Subscriber) *member {
	m := b.subsOf[s]
	if m == nil {
		m = &member{s: s, lanes: map[string]int{}}
		b.subsOf[s] = m
	}
	return m
}

// leftLocked notes that m no longer watches channel: what it holds back
// of it goes, and what waited only for its lane may go now.
func (b *Bus) leftLocked(m *member, channel string) {
	l := b.laneLocked(channel)
	if m.lanes[l]--; m.lanes[l] <= 0 {
		delete(m.lanes, l)
	}
	b.purgeLocked(m, channel, -1)
	if len(m.lanes) == 0 && len(m.backlog) == 0 {
		b.unblockLocked(m)
		delete(b.subsOf, m.s)
		return
	}
	b.flushMemberLocked(m)
}

// purgeLocked drops the frames of channel m holds back up to key (all of
// them when key < 0): the state it is given holds them, or it does not
// watch the channel any more.
func (b *Bus) purgeLocked(m *member, channel string, key int64) {
	if len(m.backlog) == 0 {
		return
	}
	// Only changes: an echo or a notification is no part of a state, and
	// goes still.
	m.backlog = slices.DeleteFunc(m.backlog, func(p pending) bool {
		return p.f.channel == channel && p.f.action != "" && (key < 0 || p.key <= key)
	})
}

// deliverLocked sends m a frame at key now, when nothing before it is
// held in m's lanes, else holds it back in m's backlog. A frame that
// comes ahead of what m holds back marks m to be flushed (flushLocked)
// once the run of frames being delivered is all in place: sending m its
// backlog now could send a frame before one of the run numbered earlier.
func (b *Bus) deliverLocked(m *member, key int64, f *Frame) {
	if m.behind {
		return
	}
	if len(m.backlog) == 0 {
		l := b.blockerLocked(m, key)
		if l == "" {
			m.s.Send(f)
			return
		}
		m.backlog = append(m.backlog, pending{key, f})
		b.waitOnLocked(m, l)
		return
	}
	if len(m.backlog) >= maxBacklog {
		// Dropped once the run being delivered is done: its caller may be
		// walking a list m is in.
		m.behind = true
		b.dirty = append(b.dirty, m)
		return
	}
	if last := m.backlog[len(m.backlog)-1].key; key >= last {
		m.backlog = append(m.backlog, pending{key, f}) // behind what waits
		return
	}
	i, _ := slices.BinarySearchFunc(m.backlog, key+1, func(p pending, k int64) int { return cmpKey(p.key, k) })
	m.backlog = slices.Insert(m.backlog, i, pending{key, f})
	if i == 0 {
		b.dirty = append(b.dirty, m)
	}
}

// flushLocked sends the members marked by deliverLocked what may go of
// their backlogs.
func (b *Bus) flushLocked() {
	for len(b.dirty) > 0 {
		m := b.dirty[len(b.dirty)-1]
		b.dirty = b.dirty[:len(b.dirty)-1]
		if m.behind {
			b.fellBehindLocked(m)
			continue
		}
		b.flushMemberLocked(m)
	}
}

func cmpKey(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// blockerLocked returns a lane of m's holding back a change numbered
// before key, or "".
func (b *Bus) blockerLocked(m *member, key int64) string {
	if len(b.lanes) == 0 {
		return ""
	}
	for l := range m.lanes {
		if ln := b.lanes[l]; ln != nil && 2*ln.first() < key {
			return l
		}
	}
	return ""
}

// flushMemberLocked sends m its backlog's frames up to the first one held
// back still.
func (b *Bus) flushMemberLocked(m *member) {
	if m.behind {
		return
	}
	i := 0
	for ; i < len(m.backlog); i++ {
		if l := b.blockerLocked(m, m.backlog[i].key); l != "" {
			b.waitOnLocked(m, l)
			break
		}
		m.s.Send(m.backlog[i].f)
	}
	if i == len(m.backlog) {
		m.backlog = nil
		b.unblockLocked(m)
		return
	}
	m.backlog = m.backlog[:copy(m.backlog, m.backlog[i:])]
}

// waitOnLocked notes that m's backlog waits for lane l.
func (b *Bus) waitOnLocked(m *member, l string) {
	if m.waiting == l {
		return
	}
	b.unblockLocked(m)
	set := b.blocked[l]
	if set == nil {
		set = map[*member]struct{}{}
		b.blocked[l] = set
	}
	set[m] = struct{}{}
	m.waiting = l
}

// unblockLocked notes that m's backlog waits for no lane.
func (b *Bus) unblockLocked(m *member) {
	if m.waiting == "" {
		return
	}
	if set := b.blocked[m.waiting]; set != nil {
		delete(set, m)
		if len(set) == 0 {
			delete(b.blocked, m.waiting)
		}
	}
	m.waiting = ""
}

// fellBehindLocked drops m, whose backlog is full: a lane it watches has
// not written a batch down while others sent more than it can hold. It
// is told, when it can be (a connection cuts itself, and its client
// reconnects).
func (b *Bus) fellBehindLocked(m *member) {
	if b.subsOf[m.s] != m {
		return // dropped already
	}
	for ch, w := range b.subs {
		if i, ok := w.index[m]; ok {
			w.remove(i)
			if len(w.list) == 0 {
				delete(b.subs, ch)
			}
		}
	}
	b.unblockLocked(m)
	delete(b.subsOf, m.s)
	n := len(m.backlog) // a mark to flush it finds nothing

	m.backlog, m.lanes = nil, map[string]int{}
	if fb, ok := m.s.(interface{ FellBehind(frames int) }); ok {
		fb.FellBehind(n)
	}
}

// holdLocked puts a batch just numbered in its lanes.
func (b *Bus) holdLocked(bt *Batch) {
	for _, l := range bt.lanes {
		ln := b.lanes[l]
		if ln == nil {
			ln = &lane{}
			b.lanes[l] = ln
		}
		ln.held = append(ln.held, bt)
	}
}

// letGoLocked takes a batch released (or discarded) out of its lanes,
// and returns those whose oldest batch held it was: what waits for them
// may go once the batch's own changes are delivered (movedLocked).
func (b *Bus) letGoLocked(bt *Batch) (moved []string) {
	for _, l := range bt.lanes {
		ln := b.lanes[l]
		if ln == nil || ln.held[0] != bt {
			continue // held behind another of the lane's, which is still held
		}
		i := 0
		for i < len(ln.held) && ln.held[i].released {
			ln.held[i] = nil
			i++
		}
		ln.held = ln.held[i:]
		if len(ln.held) == 0 {
			delete(b.lanes, l)
		}
		moved = append(moved, l)
	}
	return moved
}

// movedLocked sends what waited for lane l, whose oldest batch held went.
func (b *Bus) movedLocked(l string) {
	if set := b.blocked[l]; set != nil {
		delete(b.blocked, l)
		for m := range set {
			m.waiting = ""
			b.flushMemberLocked(m)
		}
	}
	if len(b.waits) == 0 {
		return
	}
	b.waits = slices.DeleteFunc(b.waits, func(w *laneWait) bool {
		if !slices.Contains(w.lanes, l) || b.holdsLocked(w.lanes, w.upTo) {
			return false
		}
		close(w.done)
		return true
	})
}

// holdsLocked reports whether one of lanes holds back a change numbered
// up to upTo.
func (b *Bus) holdsLocked(lanes []string, upTo int64) bool {
	for _, l := range lanes {
		if ln := b.lanes[l]; ln != nil && ln.first() <= upTo {
			return true
		}
	}
	return false
}

// closed is a channel closed already: nothing to wait for.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// waitLocked returns a channel closed once lanes hold back nothing
// numbered up to upTo.
func (b *Bus) waitLocked(lanes []string, upTo int64) <-chan struct{} {
	if !b.holdsLocked(lanes, upTo) {
		return closed
	}
	w := &laneWait{lanes: lanes, upTo: upTo, done: make(chan struct{})}
	b.waits = append(b.waits, w)
	return w.done
}
