package host

import "github.com/ahpd/ahpd/host/conn"

// Revocation: a connection is let in by the token it presents at its
// handshake, and stays open long after. When the users directory changes,
// every open connection is checked again, and one whose token was revoked,
// or whose user was removed, is closed at once with the reason in the
// WebSocket close frame; its next handshake gets HTTP 401. A role changed
// needs no recheck: every command is checked against the role as it is
// now. Root's connections (the connection token, stdio) are never cut.

// watchUsers rechecks the connections each time the users directory
// changes, until the host closes. A host whose directory cannot change
// (none, or a fixed one) has nothing to watch.
func (h *Host) watchUsers() {
	defer h.wg.Done()
	changed := h.opts.Auth.Changed()
	if changed == nil {
		return
	}
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-changed:
		}
		// The next change's channel is taken before this one is acted on,
		// so a change made during the recheck sets off another.
		changed = h.opts.Auth.Changed()
		h.recheckConns()
	}
}

// recheckConns closes every connection whose credential the users
// directory no longer accepts.
func (h *Host) recheckConns() {
	conns := h.connList()
	for _, c := range conns {
		if err := h.opts.Auth.Recheck(c.Credential()); err != nil {
			c.Log().Info("closing a connection the users directory no longer accepts", "why", err)
			h.metrics.cutFor(conn.CutRevoked)
			c.Cut(conn.ClosePolicy, err.Error())
		}
	}
}
