package host

import (
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Clients: the host remembers each client id that initialized (the version
// it negotiated, who it acts for) while it has a connection and for
// Options.ClientWindow after its last one closed, so the client can
// reconnect. A client forgotten, or never known (the host restarted), is
// answered -32008 and starts again with initialize, as VS Code's own host
// does. The sessions a client made and never sent a turn in are its own
// for as long as it is remembered; the host drops them when it forgets the
// client.

// defaultClientWindow is how long a client with no connection is
// remembered: VS Code retries a lost connection for a few minutes.
const defaultClientWindow = 10 * time.Minute

// maxClientID bounds a client id: it is kept and logged.
const maxClientID = 256

// client is what the host remembers of a client id.
type client struct {
	version   string
	principal grants.Principal
	conns     int       // open connections initialized as this client
	left      time.Time // when its last connection closed
}

// joinClient records that c is initialized as clientID, speaking version.
// A client id taken by somebody else with a connection open is refused:
// the id names the provisional sessions it made.
func (h *Host) joinClient(c *conn.Conn, clientID, version string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := h.clients[clientID]
	if cl != nil && cl.conns > 0 && cl.principal != c.Principal() {
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for initialize: clientId: %s is in use by another principal", protocol.Quote(clientID))
	}
	if cl == nil || cl.principal != c.Principal() {
		cl = &client{principal: c.Principal()}
		h.clients[clientID] = cl
	}
	cl.version = version
	cl.conns++
	return nil
}

// rejoinClient records that c reconnects as clientID and returns the
// version it negotiated. An id the host does not remember, or remembers
// for somebody else, is -32008.
func (h *Host) rejoinClient(c *conn.Conn, clientID string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := h.clients[clientID]
	if cl == nil || cl.principal != c.Principal() {
		return "", protocol.Errorf(protocol.CodeNotFound, "client %s is not known to this host (it restarted, or the client was away too long): send initialize", protocol.Quote(clientID))
	}
	cl.conns++
	return cl.version, nil
}

// leaveClient records that one of clientID's connections closed.
func (h *Host) leaveClient(clientID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cl := h.clients[clientID]; cl != nil && cl.conns > 0 {
		cl.conns--
		if cl.conns == 0 {
			cl.left = h.now()
		}
	}
}

// clientConnected reports whether clientID has a connection open.
func (h *Host) clientConnected(clientID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := h.clients[clientID]
	return cl != nil && cl.conns > 0
}

// forgetClients forgets the clients away longer than the window and drops
// the sessions they made and never sent a turn in.
func (h *Host) forgetClients(now time.Time) {
	h.mu.Lock()
	forgotten := map[string]bool{}
	for id, cl := range h.clients {
		if cl.conns == 0 && now.Sub(cl.left) >= h.opts.ClientWindow {
			delete(h.clients, id)
			forgotten[id] = true
		}
	}
	h.mu.Unlock()
	if len(forgotten) == 0 {
		return
	}
	var gone []*session.Session
	for _, s := range h.sessionList() {
		if s.UnusedBy(forgotten) {
			gone = append(gone, s)
		}
	}
	for _, s := range gone {
		if err := h.dispose(h.ctx, s); err != nil {
			h.log.Warn("dropping an unused session", "session", s.URI(), "err", err)
		}
		h.log.Info("dropped a session its creator never used", "session", s.URI())
	}
}

// dropActiveClient removes clientID's entry from the active clients of
// every session that has one: the client's tools went with its last
// connection.
func (h *Host) dropActiveClient(clientID string) {
	for _, s := range h.sessionList() {
		s.DropActiveClient(clientID)
	}
}
