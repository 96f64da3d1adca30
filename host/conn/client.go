package conn

import (
	"fmt"

	"github.com/ahpd/ahpd/protocol"
)

// Initialized reports whether initialize (or reconnect) has answered.
func (c *Conn) Initialized() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// SetClient records who the client is, once: a connection is initialized
// (or reconnected) one time, and its version stays what was negotiated,
// since everything sent on it is gated by it. A second call changes
// nothing and answers the error to send.
func (c *Conn) SetClient(clientID, version string) error {
	if !c.hello.CompareAndSwap(nil, &hello{clientID: clientID, version: version}) {
		return protocol.Errorf(protocol.CodeInvalidRequest, "this connection is already initialized as %s: open a new connection to start again", protocol.Quote(c.Client()))
	}
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	return nil
}

// hello is who the client said it is, set once: it is read without a
// lock, also by a session checking who may see it.
type hello struct{ clientID, version string }

// Negotiated returns the protocol version the connection speaks, or "".
func (c *Conn) Negotiated() string {
	if h := c.hello.Load(); h != nil {
		return h.version
	}
	return ""
}

// SetNumbering records which numbering of its client's actions the
// connection's clientSeqs are of (package retries).
func (c *Conn) SetNumbering(id uint64) { c.numbering.Store(id) }

// Numbering is the numbering of its clientSeqs; 0 before it initialized.
func (c *Conn) Numbering() uint64 { return c.numbering.Load() }

// Client is the client id it initialized as, or "".
func (c *Conn) Client() string {
	if h := c.hello.Load(); h != nil {
		return h.clientID
	}
	return ""
}

// NoteForwardedTo records that c forwarded a request to a host.
func (c *Conn) NoteForwardedTo(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forwardedTo == nil {
		c.forwardedTo = map[string]bool{}
	}
	c.forwardedTo[id] = true
}

// ForwardedHosts are the hosts c forwarded requests to.
func (c *Conn) ForwardedHosts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.forwardedTo))
	for id := range c.forwardedTo {
		out = append(out, id)
	}
	return out
}

// Attaching to sessions: a connection holds at most
// Limits.AttachedSessions session subscriptions (Config.Attached says
// which channels are a session's; subscribing again to a session held
// does not count). Past it, subscribe is refused with reason
// too_many_attached, the convention read_only set: the reason is the
// message's first word, and the error's data names it too.

// TooManyAttachedReason is the reason a session subscription past the
// limit is refused with.
const TooManyAttachedReason = "too_many_attached"

// attachRefusal is the data of an error refusing an attach.
type attachRefusal struct {
	Reason string `json:"reason"`
	Limit  int    `json:"limit,omitempty"`
}

// TooManyAttached is the error refusing a session subscription to a
// connection that holds held of them.
func TooManyAttached(held int) error {
	return &protocol.Error{
		Code: protocol.CodeInvalidRequest,
		Message: fmt.Sprintf("%s: this connection holds %d session subscriptions, the most it may: unsubscribe from one first",
			TooManyAttachedReason, held),
		Data: attachRefusal{Reason: TooManyAttachedReason, Limit: held},
	}
}

// RoomFor splits the channels a reconnect resumes into those c may hold
// and the sessions past Limits.AttachedSessions, which it is told are
// missing, as a subscribe of them would be refused.
func (c *Conn) RoomFor(channels []string) (kept []string, over []protocol.URI) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.sessions
	seen := map[string]bool{}
	for _, ch := range channels {
		if c.countsAttached(ch) && !c.subs[ch] && !seen[ch] {
			if held >= c.limits.AttachedSessions {
				over = append(over, ch)
				continue
			}
			held++
			seen[ch] = true
		}
		kept = append(kept, ch)
	}
	return kept, over
}
