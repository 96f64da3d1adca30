package session

import (
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// ListRow is a session as a listing sees it at one moment: its row and
// who it is listed to. Nobody modifies one once made: a session makes a
// new one when any of it changes (relistLocked) and the listing order
// files it, so a page reads rows without any session's lock, however
// busy the sessions on it are. What a page derives from a row (its JSON,
// the text a search reads) is worked out once, by the first page that
// needs it, and kept with it.
type ListRow struct {
	Summary  protocol.SessionSummary
	Owner    string // the owner's principal; "" for none
	Private  bool   // its owner keeps it to themselves
	Hidden   bool   // listed to nobody: disposed, or nobody sent a turn in it yet
	External bool   // a backend's own session a client opened: listed only while the view shows it

	// What the session made it from, for relistLocked to tell whether
	// it changed.
	gen    uint64                       // the session's summaryGen
	config *protocol.SessionConfigState // the config it was made with (replaced whole on a change)

	json  atomic.Pointer[[]byte]
	words atomic.Pointer[string]
	repo  atomic.Pointer[string]
}

// NewListRow returns the row of a summary no session holds (a
// catalogue's external row): listed to anyone the listing shows it to.
func NewListRow(sum protocol.SessionSummary) *ListRow { return &ListRow{Summary: sum} }

// NewOwnedListRow returns a row of sum owned by owner, for tests of the
// listing.
func NewOwnedListRow(sum protocol.SessionSummary, owner string, private bool) *ListRow {
	return &ListRow{Summary: sum, Owner: owner, Private: private}
}

// Shows reports whether a listing for me shows the row: of every session
// me may read (with all, every session), or with mine of those me owns; a
// backend's own session only when shown (the external rows the listing
// shows, by URI).
func (r *ListRow) Shows(mine bool, me string, all bool, shown map[string]bool) bool {
	// A session nobody sent a turn in is listed to nobody: VS Code makes
	// one for every empty chat it shows.
	listed := !r.Hidden && (!mine || (me != "" && r.Owner == me))
	if listed && !all && r.Owner != "" && r.Owner != me {
		listed = !r.Private
	}
	if r.External {
		listed = listed && shown[r.Summary.Resource]
	}
	return listed
}

// JSON is the row's summary as a listing sends it, encoded once.
func (r *ListRow) JSON() []byte {
	if p := r.json.Load(); p != nil {
		return *p
	}
	b, err := protocol.Append(nil, &r.Summary)
	if err != nil {
		// A summary the protocol cannot encode is a bug; the slow path
		// says what it is.
		b, _ = json.Marshal(&r.Summary)
	}
	r.json.Store(&b)
	return b
}

// Words is the text a listing's search reads of the row, case folded:
// its title, working folders, branch and agent, apart.
func (r *ListRow) Words() string {
	if p := r.words.Load(); p != nil {
		return *p
	}
	s := &r.Summary
	var hay strings.Builder
	hay.WriteString(s.Title)
	for _, w := range s.WorkingDirectories {
		hay.WriteByte(0)
		if u, err := url.Parse(w); err == nil && u.Scheme == "file" {
			w = u.Path
		}
		hay.WriteString(w)
	}
	if raw, ok := s.Meta[branchMeta]; ok {
		var b string
		if json.Unmarshal(raw, &b) == nil {
			hay.WriteByte(0)
			hay.WriteString(b)
		}
	}
	hay.WriteByte(0)
	hay.WriteString(s.Provider)
	w := strings.ToLower(hay.String())
	r.words.Store(&w)
	return w
}

// Repo is the repository the row's session works in, as a listing
// groups by it: the one its worktree was made from (_meta["ahpd.repo"]),
// else its first working folder, else "(no folder)".
func (r *ListRow) Repo() string {
	if p := r.repo.Load(); p != nil {
		return *p
	}
	s := &r.Summary
	repo := ""
	if raw, ok := s.Meta[repoMeta]; ok {
		_ = json.Unmarshal(raw, &repo)
	}
	if repo == "" && len(s.WorkingDirectories) > 0 {
		repo = s.WorkingDirectories[0]
		if u, err := url.Parse(repo); err == nil && u.Scheme == "file" {
			repo = u.Path
		}
	}
	if repo == "" {
		repo = "(no folder)"
	}
	r.repo.Store(&repo)
	return repo
}

// Row is the session's newest listing row. It takes no lock: a listing
// reads it while the session is busy.
func (s *Session) Row() *ListRow { return s.row.Load() }

// setSummaryLocked replaces the session's summary, which a listing
// follows once the lock is let go (relistLocked).
func (s *Session) setSummaryLocked(sum protocol.SessionSummary) {
	s.summary = sum
	s.summaryGen++
}

// relistLocked makes the session's listing row anew when what it lists
// changed since the last (its summary, owner, sharing, whether it is
// listed), and queues telling the listing so. Called as the lock is let
// go (unlock), so no change is missed, and cheap when nothing changed: a
// turn's every delta passes here.
func (s *Session) relistLocked() {
	if r := s.newRowLocked(); r != nil {
		s.row.Store(r)
		s.out.Later(func() { s.h.Relist(s) })
	}
}

// firstRowLocked gives a session being made its first row, which the
// host files as it adds the session to the registry.
func (s *Session) firstRowLocked() {
	if r := s.newRowLocked(); r != nil {
		s.row.Store(r)
	}
}

// newRowLocked is the session's row when it differs from the last, else
// nil.
func (s *Session) newRowLocked() *ListRow {
	hidden, external := s.disposed || s.provisional, s.rec.External
	last := s.row.Load()
	// The config is compared by pointer, as its reducer replaces it whole:
	// a busy host's residency check lets go of every session's lock, and a
	// look-up in each config was most of that.
	if last != nil && last.gen == s.summaryGen && last.config == s.state.Config && last.Owner == s.rec.Owner &&
		last.Hidden == hidden && last.External == external {
		return nil
	}
	return &ListRow{Summary: s.summary, Owner: s.rec.Owner, Hidden: hidden, External: external,
		Private: s.targetLocked().Sharing == grants.SharePrivate, gen: s.summaryGen, config: s.state.Config}
}
