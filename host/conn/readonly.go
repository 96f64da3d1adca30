package conn

import "github.com/ahpd/ahpd/protocol"

// Read-only subscriptions: a client that subscribes with
// _meta {"ahpd.readOnly": true} (a dashboard, a person looking over an
// agent's shoulder) has every action it dispatches on that channel
// refused with reason read_only, whatever its grants allow, until it
// subscribes again without it or unsubscribes.

// ReadOnlyMeta is the _meta key of a read-only subscription.
const ReadOnlyMeta = "ahpd.readOnly"

// ReadOnlyReason is the rejection reason of a write on such a channel.
const ReadOnlyReason = "read_only: this connection subscribed to the channel read-only; subscribe again without _meta ahpd.readOnly to act on it"

// SetReadOnly records whether c subscribed to channel read-only.
func (c *Conn) SetReadOnly(channel string, meta protocol.Object) {
	on := string(meta[ReadOnlyMeta]) == "true"
	c.mu.Lock()
	defer c.mu.Unlock()
	if !on {
		delete(c.readOnly, channel)
		return
	}
	if c.readOnly == nil {
		c.readOnly = map[string]bool{}
	}
	c.readOnly[channel] = true
}

// ReadOnlyFor reports whether c subscribed to channel read-only.
func (c *Conn) ReadOnlyFor(channel string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readOnly[channel]
}
