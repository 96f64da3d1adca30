// Package retries remembers which of a client's actions the host took, so
// that an action sent again (a client that lost its connection before the
// echo cannot know whether the first got through) is answered as taken
// instead of being applied a second time.
//
// An action is named by its client id, the numbering its clientSeq is of,
// and its clientSeq. A client numbers its actions anew each time it
// initializes, and carries a numbering on across reconnects (VS Code keeps
// its counter for as long as the client lives); connections that
// initialize with one client id side by side (the HTTP API's, one id a
// person) each have a numbering of their own. The host claims an action
// as it hands it to the state it changes (Claim); a refusal lets the claim
// go again (Release), since nothing was applied and the client may try
// again. What the host learns from its journal (a gap replayed, a session
// read back after a restart or a takeover) is marked as taken too (Mark),
// without knowing what the action held: in the numbering the client
// carries on, for the journal's actions since that numbering began.
//
// clientSeq 0 is never claimed: VS Code sends its root/configChanged
// actions with clientSeq 0 (NOTES.md), and the protocol does not promise
// that a clientSeq is used once unless it counts.
//
// The package owns the table and its bounds; it knows nothing of
// connections, channels or what an action does. Its lock is its own and
// nothing is taken under it.
package retries

import (
	"hash/maphash"
	"slices"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// PerClient bounds how many clientSeqs are kept for one numbering: the
// oldest taken are forgotten first. A client resends what it sent just
// before a cut, never thousands of actions back.
const PerClient = 1024

// Numberings bounds how many numberings of one client are kept: a client
// carries on its newest, and one forgotten costs only the deduplication
// of its actions, never a refusal.
const Numberings = 8

// Verdict is what Claim found.
type Verdict int

const (
	// Fresh: the action was not taken before; it is claimed now and is
	// to be applied.
	Fresh Verdict = iota
	// Repeat: the same action was taken before (or one the journal says
	// was, whose content is not known): answer it as taken, apply
	// nothing.
	Repeat
	// Reused: another action was taken with this clientSeq: refuse it.
	Reused
)

func (v Verdict) String() string {
	switch v {
	case Fresh:
		return "fresh"
	case Repeat:
		return "repeat"
	case Reused:
		return "reused"
	}
	return "unknown"
}

// Token names a claim, so that only the dispatch that made it lets it go.
type Token = any

// Table is the actions taken, per client. The zero value is not ready:
// use New.
type Table struct {
	mu      lockcheck.Mutex
	seed    maphash.Seed
	clients map[string]*client
}

// client is what is kept of one client: its numberings, newest last, and
// what the journal said was taken of it before any was known (a session
// read back as the host starts, before the clients' notes).
type client struct {
	numberings []*numbering
	pending    []mark
}

type mark struct{ seq, at int64 }

// numbering is one numbering of a client's actions: its taken clientSeqs,
// and the order they were taken in, to forget the oldest.
type numbering struct {
	id uint64
	// since is the newest serverSeq as the numbering began: the
	// journal's actions of the client at or below it are another's.
	since int64
	taken map[int64]claim
	order []int64 // a ring of the keys of taken, oldest at next
	next  int
}

type claim struct {
	digest   uint64 // 0: not known (marked from the journal)
	token    Token  // the dispatch that claimed it, nil when marked
	released bool   // refused: free to be claimed again, in its place
}

// New returns an empty table.
func New() *Table {
	return &Table{mu: lockcheck.Mutex{Class: "retries"}, seed: maphash.MakeSeed(), clients: map[string]*client{}}
}

// Digest is what Claim compares two sends of a clientSeq by: the channel
// and the action's bytes as the host encodes them.
func (t *Table) Digest(channel string, action []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(channel)
	h.WriteByte(0)
	h.Write(action)
	if d := h.Sum64(); d != 0 {
		return d
	}
	return 1 // 0 means not known
}

// Begin records that clientID began numbering id as serverSeq since was
// the newest (it initialized): the client's newest numbering from now.
// What the journal said of it before is of numberings before.
func (t *Table) Begin(clientID string, id uint64, since int64) {
	if clientID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clientLocked(clientID)
	cl.pending = nil
	cl.add(&numbering{id: id, since: since, taken: map[int64]claim{}})
}

// Resume records that clientID's newest numbering is id, begun as since
// was the newest, with the clientSeqs of runs taken (as its note says,
// read back after a restart or on another host), and takes into it what
// the journal said of the client after since.
func (t *Table) Resume(clientID string, id uint64, since int64, runs [][2]int64) {
	if clientID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clientLocked(clientID)
	n := cl.find(id)
	if n == nil {
		n = &numbering{id: id, since: since, taken: map[int64]claim{}}
		cl.add(n)
	}
	budget := int64(PerClient)
	for i := len(runs) - 1; i >= 0 && budget > 0; i-- {
		first, last := runs[i][0], runs[i][1]
		if last < first {
			continue
		}
		first = max(first, last-budget+1)
		budget -= last - first + 1
		for seq := first; seq <= last; seq++ {
			n.mark(seq)
		}
	}
	for _, m := range cl.pending {
		if m.at > n.since {
			n.mark(m.seq)
		}
	}
	cl.pending = nil
}

// Claim records that clientID's action clientSeq of numbering id, of
// digest, is being taken by the dispatch token names, unless it was taken
// before; it says which. clientSeq 0, or no client id, is always Fresh and
// not kept.
func (t *Table) Claim(clientID string, id uint64, clientSeq int64, digest uint64, token Token) Verdict {
	if clientSeq == 0 || clientID == "" {
		return Fresh
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clientLocked(clientID)
	n := cl.find(id)
	if n == nil { // forgotten, or begun before this host knew
		n = &numbering{id: id, taken: map[int64]claim{}}
		cl.add(n)
	}
	was, ok := n.taken[clientSeq]
	switch {
	case ok && was.released:
		n.taken[clientSeq] = claim{digest: digest, token: token}
		return Fresh
	case ok && (was.digest == 0 || was.digest == digest):
		return Repeat
	case ok:
		return Reused
	}
	n.add(clientSeq, claim{digest: digest, token: token})
	return Fresh
}

// Release lets go of the claim token made of clientID's clientSeq: the
// action was refused, so nothing of it was applied. A claim made by
// another dispatch, or marked from the journal, stays.
func (t *Table) Release(clientID string, clientSeq int64, token Token) {
	if clientSeq == 0 || clientID == "" || token == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clients[clientID]
	if cl == nil {
		return
	}
	for _, n := range cl.numberings {
		if was, ok := n.taken[clientSeq]; ok && was.token == token && !was.released {
			was.released = true
			n.taken[clientSeq] = was
			return
		}
	}
}

// Mark records that clientID's action clientSeq was taken, as the journal
// says at serverSeq at: what it held is not known, so any send of it
// again is a Repeat. It is of numbering id, or of the client's newest
// when id is 0 (a session read back); an action at or below the
// numbering's since is of one before, and a claim already kept is left as
// it is. With no numbering of the client known yet, the mark waits for
// Begin or Resume.
func (t *Table) Mark(clientID string, id uint64, clientSeq, at int64) {
	if clientSeq == 0 || clientID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.clientLocked(clientID)
	var n *numbering
	if id != 0 {
		n = cl.find(id)
	} else if len(cl.numberings) > 0 {
		n = cl.numberings[len(cl.numberings)-1]
	}
	switch {
	case n != nil && at > n.since:
		n.mark(clientSeq)
	case n == nil && id == 0 && len(cl.pending) < PerClient:
		cl.pending = append(cl.pending, mark{seq: clientSeq, at: at})
	}
}

// Forget drops what is kept of the clients keep does not want: those the
// host no longer remembers.
func (t *Table) Forget(keep func(clientID string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.clients {
		if !keep(id) {
			delete(t.clients, id)
		}
	}
}

// Ranges are the taken clientSeqs of clientID's numbering id, as
// ascending runs [first, last]: what a note of the client keeps of them
// (few runs, as a client numbers its actions one after another).
func (t *Table) Ranges(clientID string, id uint64) [][2]int64 {
	t.mu.Lock()
	var seqs []int64
	if cl := t.clients[clientID]; cl != nil {
		if n := cl.find(id); n != nil {
			seqs = make([]int64, 0, len(n.taken))
			for seq, c := range n.taken {
				if !c.released {
					seqs = append(seqs, seq)
				}
			}
		}
	}
	t.mu.Unlock()
	slices.Sort(seqs)
	var runs [][2]int64
	for _, seq := range seqs {
		if k := len(runs); k > 0 && runs[k-1][1] == seq-1 {
			runs[k-1][1] = seq
			continue
		}
		runs = append(runs, [2]int64{seq, seq})
	}
	return runs
}

// Taken is how many clientSeqs of clientID's numbering id are kept as
// taken.
func (t *Table) Taken(clientID string, id uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	count := 0
	if cl := t.clients[clientID]; cl != nil {
		if n := cl.find(id); n != nil {
			for _, c := range n.taken {
				if !c.released {
					count++
				}
			}
		}
	}
	return count
}

// clientLocked is what is kept of clientID, made if there is none.
func (t *Table) clientLocked(clientID string) *client {
	cl := t.clients[clientID]
	if cl == nil {
		cl = &client{}
		t.clients[clientID] = cl
	}
	return cl
}

func (cl *client) find(id uint64) *numbering {
	for _, n := range cl.numberings {
		if n.id == id {
			return n
		}
	}
	return nil
}

// add keeps n as the client's newest numbering, forgetting the oldest
// past Numberings.
func (cl *client) add(n *numbering) {
	cl.numberings = append(cl.numberings, n)
	if len(cl.numberings) > Numberings {
		cl.numberings = slices.Delete(cl.numberings, 0, 1)
	}
}

// mark takes seq as taken from the journal or a note: a claim kept stays.
func (n *numbering) mark(seq int64) {
	switch was, ok := n.taken[seq]; {
	case !ok:
		n.add(seq, claim{})
	case was.released:
		n.taken[seq] = claim{}
	}
}

// add keeps seq, forgetting the oldest kept when the numbering has
// PerClient already. A seq is in order once: a claim let go stays in its
// place (released) and is claimed again there.
func (n *numbering) add(seq int64, c claim) {
	if len(n.order) < PerClient {
		n.order = append(n.order, seq)
	} else {
		delete(n.taken, n.order[n.next])
		n.order[n.next] = seq
		n.next = (n.next + 1) % PerClient
	}
	n.taken[seq] = c
}
