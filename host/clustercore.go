package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/host/shared"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/protocol"
)

// clusterCore is the host as its cluster part sees it (shared.Core): a
// type of its own, so that what the part asks of the host stays off
// Host's exported methods.
type clusterCore Host

var _ shared.Core = (*clusterCore)(nil)

func (cc *clusterCore) h() *Host { return (*Host)(cc) }

func (cc *clusterCore) Context() context.Context { return cc.ctx }
func (cc *clusterCore) Logger() *slog.Logger     { return cc.log }
func (cc *clusterCore) Now() time.Time           { return cc.now() }
func (cc *clusterCore) Bus() *fanout.Bus         { return cc.bus }

func (cc *clusterCore) Go(f func()) {
	cc.wg.Add(1)
	go func() {
		defer cc.wg.Done()
		f()
	}()
}

func (cc *clusterCore) Session(id string) *session.Session { return cc.h().byID(id) }

func (cc *clusterCore) Status(c *conn.Conn, uri string) (string, error) {
	return cc.h().status(c, uri)
}

// Sleep puts to sleep a session whose lease was lost: unloaded when no
// client watches it, else with its turns kept.
func (cc *clusterCore) Sleep(s *session.Session) {
	if !cc.h().sleep(s, true, false) {
		cc.h().sleep(s, false, false)
	}
}

func (cc *clusterCore) Restore(rec *session.Record) (*session.Session, error) {
	return cc.h().restore(rec, nil)
}

func (cc *clusterCore) Forget(id string) *session.Session {
	h := cc.h()
	h.mu.Lock()
	s := h.sessions[id]
	if s != nil {
		delete(h.sessions, id)
	}
	h.mu.Unlock()
	if s != nil {
		h.order.Remove(s)
	}
	return s
}

func (cc *clusterCore) UnsubscribeAll(channel string) { cc.h().unsubscribeAll(channel) }

func (cc *clusterCore) RefuseAction(c *conn.Conn, channel string, params []byte, reason string) {
	var p dispatchParams
	if jsonUnmarshal(params, &p) != nil {
		return
	}
	origin := &protocol.ActionOrigin{ClientID: c.Client(), ClientSeq: p.ClientSeq}
	cc.h().refuse(c, channel, echoable(p.Action), origin, reason)
}

func (cc *clusterCore) DecodeParams(req *jrpc2.Request, v json.Unmarshaler) error {
	return params(req, v)
}

func (cc *clusterCore) Connect(cred grants.Credential, from string) (io.ReadWriteCloser, error) {
	return cc.h().connect(cred, from)
}

// Conn returns the connection of an id, or nil when it is gone.
func (cc *clusterCore) Conn(id int64) *conn.Conn {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for c := range cc.conns {
		if c.ID() == id {
			return c
		}
	}
	return nil
}

// SessionOfChannel returns the id and URI of the session a channel
// belongs to, or "" for a channel of no session (root, an automation's).
func (cc *clusterCore) SessionOfChannel(channel string) (string, string) {
	if isAutomationChannel(channel) {
		return "", ""
	}
	kind, err := protocol.ClassifyChannel(channel)
	if err != nil {
		return "", ""
	}
	switch kind {
	case protocol.ChannelSession:
		if su, err := protocol.ParseSessionURI(channel); err == nil {
			return su.ID, channel
		}
	case protocol.ChannelChat:
		if s := cc.h().chatHome(channel); s != nil {
			return s.ID(), s.URI()
		}
		if cu, err := protocol.ParseChatURI(channel); err == nil {
			if su, err := protocol.ParseSessionURI(cu.Session); err == nil {
				return su.ID, cu.Session
			}
		}
	}
	return "", ""
}

// Fence claims a session in the journal for this host (journal.Claim).
// One the host has no copy of yet is claimed before its first append
// (claimFirst).
func (cc *clusterCore) Fence(ctx context.Context, id string) error {
	h := cc.h()
	if h.opts.Journal == nil {
		return nil
	}
	s := h.byID(id)
	if s == nil {
		h.unclaimed.Store(id, true)
		return nil
	}
	h.unclaimed.Delete(id)
	h.fenced.Delete(s.URI())
	seq, err := h.opts.Journal.Claim(ctx, s.URI(), h.hostName())
	if err != nil {
		return fmt.Errorf("claiming it in the journal: %w", err)
	}
	h.log.Debug("claimed a session in the journal", "session", s.URI(), "claim", seq)
	return nil
}

// Refresh brings the copy of a session this host has up to date, for a
// session it has just taken: another host may have run it since this one
// last did, and written its journal (and, with records in the cluster,
// its record). A session asleep here with nobody using it is made again
// from its record and its journal's tail, as after a restart, and a turn
// the other host left running ends as cut short. One in use here is
// left as it is.
func (cc *clusterCore) Refresh(ctx context.Context, id string) error {
	h := cc.h()
	if h.opts.Journal == nil {
		return nil
	}
	s := h.byID(id)
	if s == nil {
		return nil
	}
	// Its changes here are numbered after every one its journal holds,
	// whatever this host's clock and start: also when the copy here is in
	// use and kept.
	newest, err := h.sessionNewest(ctx, s.URI())
	if err != nil {
		return fmt.Errorf("reading the journal's newest entry: %w", err)
	}
	h.bus.AtLeast(newest)
	data, unused, err := s.UnusedRecord()
	if !unused || err != nil {
		return err
	}
	var rec session.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	rc, err := h.recoverSession(ctx, rec.URI)
	if err != nil {
		return fmt.Errorf("reading the journal's tail: %w", err)
	}
	if rc == nil {
		return nil
	}
	// Its changes here are numbered after the other host's.
	h.bus.AtLeast(rc.Newest)
	ns, err := h.restore(&rec, rc)
	if err != nil {
		return err
	}
	if !cc.Replace(s, ns) {
		return nil // changed meanwhile: left to whoever changed it
	}
	h.marks.note(ns.URI(), rc.Mark.ServerSeq, rc.Mark.Seq)
	h.endCutTurns([]*session.Session{ns}, map[*session.Session]bool{ns: rc.Stale})
	return nil
}

// Replace puts ns in the registry in place of old (nil: none), reporting
// false when old is no longer the one there; old is marked disposed, so
// whoever still has it does nothing with it.
func (cc *clusterCore) Replace(old, ns *session.Session) bool {
	h := cc.h()
	chats := ns.ChatOrder()
	h.mu.Lock()
	if h.sessions[ns.ID()] != old {
		h.mu.Unlock()
		return false
	}
	h.sessions[ns.ID()] = ns
	for _, chat := range chats {
		if cu, err := protocol.ParseChatURI(chat); err == nil && cu.Session != ns.URI() {
			h.homes[chat] = ns.ID() // a chat moved into it
		}
	}
	h.mu.Unlock()
	if old != nil {
		h.order.Remove(old)
		old.MarkDisposed()
	}
	h.order.Add(ns)
	return true
}

func (cc *clusterCore) Follow(ctx context.Context, uri string, after uint64) (*journal.Follower, error) {
	return cc.opts.Journal.Follow(ctx, uri, after)
}

// Replicate rebuilds a session's state from its journal, for a mirror.
func (cc *clusterCore) Replicate(ctx context.Context, uri string) (shared.Replica, error) {
	h := cc.h()
	if h.opts.Journal == nil {
		return nil, errors.New("this host keeps no journal to watch the session from")
	}
	var after uint64
	if mk, ok := h.restartPoint(ctx, uri); ok {
		after = mk.Seq - 1
	}
	r := newReplayer(uri)
	r.resolve = h.turnsResolver(ctx, uri)
	done, err := h.replay(ctx, r, after, -1, maxRecoverEntries)
	if err != nil {
		return nil, fmt.Errorf("reading the session's journal: %w", err)
	}
	if !done {
		return nil, errors.New("the session's journal is too long to read back")
	}
	if _, ok := r.states[uri].(*protocol.SessionState); !ok {
		return nil, errors.New("the session's journal holds no state of it yet")
	}
	r.fillAll() // its clients are shown every turn
	return &replica{h: h, uri: uri, states: r.states, last: r.last, dupes: r.dupes}, nil
}

// replica is a session another host runs as rebuilt from its journal
// (shared.Replica); its mirror holds its lock around all but Prepare's
// reading.
type replica struct {
	h      *Host
	uri    string
	states map[string]protocol.ChannelState // by channel: the session's and its chats'
	last   uint64                           // the journal sequence of the last entry replayed
	dupes  dupes                            // what a retried append wrote twice, passed over
}

func (r *replica) Last() uint64 { return r.last }

func (r *replica) Prepare(e journal.Entry) func() *protocol.ActionEnvelope {
	je, err := decodeEntry(e.Data)
	je.at = e.Seq
	// A chat's snapshot that points to its turns elsewhere in the journal
	// is shown with them, read now, before the mirror is locked.
	var turns []protocol.Turn
	var cursor *string
	filled := false
	if err == nil && je.snap != nil && je.snap.Bare && je.snap.TurnsAt != 0 {
		var ferr error
		turns, cursor, ferr = r.h.readTurnsAt(r.h.ctx, r.uri, je.snap.TurnsAt)
		filled = ferr == nil
	}
	return func() *protocol.ActionEnvelope {
		if err != nil || r.dupes.seen(e.Data) {
			return nil
		}
		switch {
		case je.snap != nil:
			// The state as the holder has it: its own, or more of a chat's
			// turns paged in.
			rp := &replayer{session: r.uri, states: r.states, turnsAt: map[string]uint64{}, bare: map[string]bool{}}
			rp.apply(je)
			if cs, ok := r.states[je.snap.Channel].(*protocol.ChatState); ok && filled {
				full := *cs
				full.Turns, full.TurnsNextCursor = turns, cursor
				r.states[je.snap.Channel] = &full
			}
		case je.env != nil:
			st := r.states[je.env.Channel]
			if st == nil {
				return nil // a chat whose snapshot comes with its next action
			}
			r.states[je.env.Channel] = protocol.Apply(st, je.env.Action)
			return je.env
		}
		return nil
	}
}

func (r *replica) View(channel string, turns int) protocol.ChannelState {
	st := r.states[channel]
	switch x := st.(type) {
	case *protocol.ChatState:
		if turns > 0 {
			st, _ = session.ViewOf(x, turns)
		}
	case *protocol.SessionState:
		st, _ = withActivity(x, r.states)
	}
	return st
}

func (r *replica) Channels() []string {
	channels := make([]string, 0, len(r.states))
	for ch := range r.states {
		channels = append(channels, ch)
	}
	return channels
}
