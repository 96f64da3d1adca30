package host

import (
	"math/rand/v2"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Clients: the host remembers each client id that initialized (the version
// it negotiated, who it acts for) while it has a connection and for
// Options.ClientWindow after its last one closed, so the client can
// reconnect. With a journal it remembers them across restarts, and across
// the hosts of a cluster (clientnotes.go). A client forgotten, or never
// known, is answered -32008 and starts again with initialize, as VS
// Code's own host does. The sessions a client made and never sent a turn
// in are its own for as long as it is remembered; the host drops them
// when it forgets the client.

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
	// moved says the client was last connected to another host of the
	// cluster: the serverSeqs it saw are that host's, so a reconnect is
	// sent snapshots.
	moved bool
	rev   uint64 // Host.clientRev when it last changed, for its note
	// numbering names the numbering of its actions begun as it last
	// initialized, which a reconnect carries on, and since is the newest
	// serverSeq then (package retries).
	numbering uint64
	since     int64
	// taken are the clientSeqs its note says were taken, as it was read
	// (clientnotes.go); the host's own are in Host.taken.
	taken [][2]int64
}

// joinClient records that c is initialized as clientID, speaking version.
// A client id taken by somebody else with a connection open is refused:
// the id names the provisional sessions it made.
func (h *Host) joinClient(c *conn.Conn, clientID, version string) error {
	defer h.noteClient(clientID) // once mu is let go
	// A client that initializes numbers its actions anew, in a numbering
	// of this connection's (another connection of the client id may be
	// open beside it, numbering its own).
	id, since := newNumbering(), h.bus.Current()
	if err := h.joinClientLocked(c, clientID, version, id, since); err != nil {
		return err
	}
	h.taken.Begin(clientID, id, since)
	c.SetNumbering(id)
	return nil
}

// newNumbering names a numbering: at random, as a restarted host must not
// name one as a remembered client's was.
func newNumbering() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

func (h *Host) joinClientLocked(c *conn.Conn, clientID, version string, numbering uint64, since int64) error {
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
	cl.moved = false
	cl.numbering, cl.since, cl.taken = numbering, since, nil
	h.clientChangedLocked(cl)
	return nil
}

// rejoinClient records that c reconnects as clientID and returns the
// version it negotiated, and whether it was last another host's. An id
// the host does not remember, or remembers for somebody else, is -32008.
func (h *Host) rejoinClient(c *conn.Conn, clientID string) (version string, moved bool, err error) {
	var found *client
	if !h.knowsClient(clientID) {
		found = h.clientFromNote(clientID) // another host's, or one this host forgot
	}
	defer h.noteClient(clientID) // once mu is let go
	version, moved, adopted, err := h.rejoinClientLocked(c, clientID, found)
	if err != nil {
		return "", false, err
	}
	if adopted {
		// What its note says was taken of it is (from another host, or
		// from before this one forgot it).
		h.taken.Resume(clientID, found.numbering, found.since, found.taken)
	}
	return version, moved, nil
}

// rejoinClientLocked counts c as clientID's, carrying on its newest
// numbering; a client found in its note is adopted.
func (h *Host) rejoinClientLocked(c *conn.Conn, clientID string, found *client) (version string, moved, adopted bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := h.clients[clientID]
	if cl == nil && found != nil && found.principal == c.Principal() {
		cl = found
		h.clients[clientID] = cl
		adopted = true
	}
	if cl == nil || cl.principal != c.Principal() {
		return "", false, false, protocol.Errorf(protocol.CodeNotFound, "client %s is not known to this host (the client was away too long, or never initialized here): send initialize", protocol.Quote(clientID))
	}
	if cl.numbering == 0 { // a note from before numberings
		cl.numbering = newNumbering()
	}
	c.SetNumbering(cl.numbering)
	cl.conns++
	h.clientChangedLocked(cl)
	return cl.version, cl.moved, adopted, nil
}

// leaveClient records that one of clientID's connections closed.
func (h *Host) leaveClient(clientID string) {
	defer h.noteClient(clientID) // once mu is let go
	h.mu.Lock()
	defer h.mu.Unlock()
	if cl := h.clients[clientID]; cl != nil && cl.conns > 0 {
		cl.conns--
		if cl.conns == 0 {
			cl.left = h.now()
		}
		// Written even as the host stops: the note keeps what was taken
		// of the client (but not that it left, clientnotes.go).
		h.clientChangedLocked(cl)
	}
}

// knowsClient reports whether the host remembers clientID.
func (h *Host) knowsClient(clientID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[clientID] != nil
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
	known := make(map[string]bool, len(h.clients))
	for id := range h.clients {
		known[id] = true
	}
	h.mu.Unlock()
	// The actions taken of a client are kept as long as the client is
	// (and those read back from the journal of clients never known here
	// go at the first sweep).
	h.taken.Forget(func(id string) bool { return known[id] })
	if len(forgotten) == 0 {
		return
	}
	for id := range forgotten {
		h.noteClient(id)
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
