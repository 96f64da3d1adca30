package session

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// branchMeta is the _meta key of a session's row that names the branch
// its worktree has checked out.
const branchMeta = "ahpd.branch"

// repoMeta is the _meta key of a session's row that names the repository
// its worktree was made from (the top of that checkout).
const repoMeta = "ahpd.repo"

// computeSummaryLocked derives the session's catalogue row from its state
// and its chats: its status and activity as protocol.SessionActivity
// makes them. The row carries the chat catalogue (chats, defaultChat) for
// 1.0 clients.
func (s *Session) computeSummaryLocked() protocol.SessionSummary {
	st := s.state
	sum := protocol.SessionSummary{
		Resource:           s.uri,
		Provider:           s.provider,
		Title:              st.Title,
		Project:            st.Project,
		WorkingDirectories: st.WorkingDirectories,
		Annotations:        st.Annotations,
		CreatedAt:          s.rec.CreatedAt,
		ModifiedAt:         s.rec.ModifiedAt,
		Changes:            s.rec.Changes,
		Meta:               st.Meta,
		DefaultChat:        st.DefaultChat,
		Chats:              make([]protocol.SessionChatSummary, 0, len(st.Chats)),
	}
	if t := s.rec.Tree; t != nil && (t.Branch != "" || t.Repo != "") {
		// The branch its worktree has checked out and the repository it
		// was made from, for a listing to show and group by.
		sum.Meta = make(protocol.Object, len(st.Meta)+2)
		maps.Copy(sum.Meta, st.Meta)
		if v, err := json.Marshal(t.Branch); err == nil && t.Branch != "" {
			sum.Meta[branchMeta] = jsontext.Value(v)
		}
		if v, err := json.Marshal(t.Repo); err == nil && t.Repo != "" {
			sum.Meta[repoMeta] = jsontext.Value(v)
		}
	}
	for _, entry := range st.Chats {
		sum.Chats = append(sum.Chats, protocol.SessionChatSummary{
			Resource: entry.Resource, Title: entry.Title, Origin: entry.Origin,
			Interactivity: entry.Interactivity, Status: new(entry.Status), Changes: entry.Changes,
		})
	}
	list := make([]*protocol.ChatState, 0, len(s.order))
	for _, uri := range s.order {
		cs := s.chats[uri].chat.State()
		if cs.ModifiedAt > sum.ModifiedAt {
			sum.ModifiedAt = cs.ModifiedAt
		}
		list = append(list, cs)
	}
	deflt := ""
	if st.DefaultChat != nil {
		deflt = *st.DefaultChat
	}
	sum.Status, sum.Activity = protocol.SessionActivity(st.Status, st.Activity, deflt, list)
	return sum
}

// refreshSummaryLocked recomputes the catalogue row and tells every client
// what changed, once the session is announced. modifiedAt only moves
// forward.
func (s *Session) refreshSummaryLocked() {
	next := s.computeSummaryLocked()
	if next.ModifiedAt < s.summary.ModifiedAt {
		next.ModifiedAt = s.summary.ModifiedAt
	}
	changes, changed := SummaryChanges(s.summary, next)
	if changed || (s.summary.Annotations != next.Annotations && !SameJSON(s.summary.Annotations, next.Annotations)) {
		// The listing's row follows (relistLocked); a turn's deltas,
		// which change nothing it lists, make it no new row.
		s.setSummaryLocked(next)
	} else {
		s.summary = next
	}
	s.rec.ModifiedAt = next.ModifiedAt
	if s.state.Status != next.Status {
		// No action carries a session's activity, which comes from its
		// chats: the state a snapshot gives is kept the same as the row.
		st := *s.state
		st.Status = next.Status
		s.state = &st
	}
	if changed && s.announced {
		params := &protocol.SessionSummaryChangedParams{Channel: protocol.RootURI, Session: s.uri, Changes: changes}
		readers := s.readersLocked()
		s.out.Later(func() { s.h.Bus.Notify(protocol.RootURI, "root/sessionSummaryChanged", params, readers) })
	}
}

// SummaryChanges lists the mutable fields that differ; identity fields
// (resource, provider, createdAt) never change.
func SummaryChanges(a, b protocol.SessionSummary) (protocol.PartialSessionSummary, bool) {
	var ch protocol.PartialSessionSummary
	changed := false
	if a.Title != b.Title {
		ch.Title, changed = new(b.Title), true
	}
	if a.Status != b.Status {
		ch.Status, changed = new(b.Status), true
	}
	if !sameString(a.Activity, b.Activity) {
		ch.Activity, changed = b.Activity, true
		if b.Activity == nil {
			ch.Activity = new("")
		}
	}
	if a.ModifiedAt != b.ModifiedAt {
		ch.ModifiedAt, changed = new(b.ModifiedAt), true
	}
	if !slices.Equal(a.WorkingDirectories, b.WorkingDirectories) {
		ch.WorkingDirectories, changed = b.WorkingDirectories, true
	}
	if !SameJSON(a.Changes, b.Changes) && b.Changes != nil {
		ch.Changes, changed = b.Changes, true
	}
	if !SameJSON(a.Project, b.Project) && b.Project != nil {
		ch.Project, changed = b.Project, true
	}
	if !SameJSON(a.Meta, b.Meta) {
		// A partial summary has no way to say "none": _meta that went
		// away is told as an empty object.
		ch.Meta, changed = b.Meta, true
		if ch.Meta == nil {
			ch.Meta = protocol.Object{}
		}
	}
	if !SameJSON(a.Chats, b.Chats) {
		ch.Chats, changed = b.Chats, true
	}
	if !sameString(a.DefaultChat, b.DefaultChat) && b.DefaultChat != nil {
		ch.DefaultChat, changed = b.DefaultChat, true
	}
	return ch, changed
}

// SameJSON compares two values by their JSON encoding.
func SameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// updateActiveLocked keeps root's count of sessions running a turn.
func (s *Session) updateActiveLocked() {
	running := false
	for _, e := range s.chats {
		if e.chat.State().ActiveTurn != nil {
			running = true
			break
		}
	}
	if running == s.running {
		return
	}
	s.running = running
	delta := int64(-1)
	if running {
		delta = 1
	}
	s.out.Later(func() { s.h.AddActive(delta) })
}
