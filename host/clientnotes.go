package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Clients across restarts and hosts. With a journal, what the host
// remembers of a client (who it acts for, the version it negotiated, when
// its last connection closed, the host it was connected to) is also a
// note in the journal (journal.SetNote), written when it changes: when a
// connection initializes or reconnects as the client, and when its last
// one closes. So a host that starts again, even after kill -9, knows the
// clients it knew, for what is left of their window (one connected when
// it stopped counts from the start), and replays them what they missed
// from the journal as if it had not stopped (replay.go). A host of a
// cluster finds another's client by its note when it reconnects there;
// that client saw the other host's serverSeqs, so it is sent snapshots
// (docs/CLUSTER.md). Nothing is written per action: a note costs one
// append per connection opened or closed.

// clientNoteSet is the journal's note set of clients.
const clientNoteSet = "clients"

// clientNote is a client as its note has it.
type clientNote struct {
	Principal string    `json:"principal"`
	Version   string    `json:"version"`
	Host      string    `json:"host,omitempty"` // the cluster host it was last connected to
	Left      time.Time `json:"left,omitzero"`  // when its last connection closed; zero while one is open
	// Taken are the clientSeqs of its actions the host took, as runs
	// [first, last] (package retries): a client that sends them again
	// after the host's restart, or through another host, is answered as
	// taken.
	Taken [][2]int64 `json:"taken,omitempty"`
	// Numbering names the numbering of its actions begun as it last
	// initialized, and Since is the newest serverSeq then: the journal's
	// actions of it at or below are of an earlier numbering.
	Numbering uint64 `json:"numbering,omitempty"`
	Since     int64  `json:"since,omitempty"`
}

// clientNotes orders the writes of the notes.
type clientNotes struct {
	mu      lockcheck.Mutex   // taken alone, held across a write so a client's notes are written in order
	written map[string]uint64 // by client id: the rev last written
}

// noteTimeout bounds a note's write or read: a journal that does not
// answer costs a client its note, not its connection.
const noteTimeout = 5 * time.Second

// clientChangedLocked marks cl changed, for noteClient.
func (h *Host) clientChangedLocked(cl *client) {
	h.clientRev++
	cl.rev = h.clientRev
}

// hostName is the cluster host this one is, "" outside a cluster.
func (h *Host) hostName() string {
	if h.opts.Cluster == nil {
		return ""
	}
	return h.opts.Cluster.HostID()
}

// noteClient writes clientID's note as the host now remembers it, or
// drops it when the host forgot the client; a note as new is not written
// again. Called without locks held.
func (h *Host) noteClient(clientID string) {
	j := h.opts.Journal
	if j == nil {
		return
	}
	h.mu.Lock()
	cl := h.clients[clientID]
	var note clientNote
	var rev uint64
	if cl != nil {
		note = clientNote{Principal: cl.principal.String(), Version: cl.version, Host: h.hostName(), Numbering: cl.numbering, Since: cl.since}
		if cl.conns == 0 && !h.closing {
			// (The host stopping is not the client leaving: its note
			// keeps it connected, so its window starts with the next
			// start, as after a crash.)
			note.Left = cl.left
		}
		rev = cl.rev
	}
	h.mu.Unlock()
	if cl != nil {
		note.Taken = h.taken.Ranges(clientID, note.Numbering)
	}

	n := &h.clientNotes
	n.mu.Lock()
	defer n.mu.Unlock()
	last, known := n.written[clientID]
	if cl != nil && known && last >= rev {
		return // written already, or a newer one was
	}
	ctx, cancel := context.WithTimeout(context.Background(), noteTimeout)
	defer cancel()
	var err error
	if cl == nil {
		delete(n.written, clientID)
		err = j.DeleteNote(ctx, clientNoteSet, clientID)
	} else {
		data, _ := json.Marshal(note)
		if err = j.SetNote(ctx, clientNoteSet, clientID, data); err == nil {
			if n.written == nil {
				n.written = map[string]uint64{}
			}
			n.written[clientID] = rev
		}
	}
	if err != nil {
		h.log.Warn("could not keep a client's note in the journal: it is remembered until this host stops", "client", clientID, "err", err)
	}
}

// clientFromNote returns the client clientID's note describes, if it is
// still within its window; nil without one.
func (h *Host) clientFromNote(clientID string) *client {
	j := h.opts.Journal
	if j == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), noteTimeout)
	defer cancel()
	n, ok, err := j.GetNote(ctx, clientNoteSet, clientID)
	if err != nil {
		h.log.Warn("could not read a client's note", "client", clientID, "err", err)
	}
	if !ok {
		return nil
	}
	cl, _ := h.clientOf(n.Data, h.now())
	return cl
}

// clientOf reads a note as of now: the client, or nil when the note is
// past its window or unreadable; own says it was this host's.
func (h *Host) clientOf(data []byte, now time.Time) (cl *client, own bool) {
	var note clientNote
	if err := json.Unmarshal(data, &note); err != nil {
		return nil, false
	}
	p, err := grants.Parse(note.Principal)
	if err != nil {
		return nil, false
	}
	left := note.Left
	if left.IsZero() {
		left = now // connected when its host stopped: the window starts again
	}
	if now.Sub(left) >= h.opts.ClientWindow {
		return nil, note.Host == h.hostName()
	}
	own = note.Host == h.hostName()
	return &client{principal: p, version: note.Version, left: left, moved: !own, taken: note.Taken, numbering: note.Numbering, since: note.Since}, own
}

// loadClients brings back the clients this host remembered when it
// stopped, and drops the notes of those whose window has passed.
func (h *Host) loadClients() {
	j := h.opts.Journal
	if j == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), noteTimeout)
	defer cancel()
	notes, err := j.Notes(ctx, clientNoteSet)
	if err != nil {
		h.log.Warn("could not read the clients' notes: clients connected before the restart start again", "err", err)
		return
	}
	now := h.now()
	var changed []string // stale notes to drop, and those to give the time the window starts
	kept := map[string]*client{}
	h.mu.Lock()
	for _, n := range notes {
		cl, own := h.clientOf(n.Data, now)
		switch {
		case cl == nil && own:
			changed = append(changed, n.Name)
		case own && h.clients[n.Name] == nil:
			h.clientChangedLocked(cl)
			h.clients[n.Name] = cl
			changed = append(changed, n.Name)
			kept[n.Name] = cl
		}
	}
	h.mu.Unlock()
	// What the sessions read back marked of an earlier numbering of a
	// client goes; what its note says was taken is.
	for id, cl := range kept {
		h.taken.Resume(id, cl.numbering, cl.since, cl.taken)
	}
	for _, id := range changed {
		h.noteClient(id)
	}
	if len(kept) > 0 {
		h.log.Info("remembered clients from before the restart", "clients", len(kept))
	}
}
