package host

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/protocol"
)

// computeSummaryLocked derives the session's catalogue row from its state
// and its chats. The status reads as VS Code's host aggregates a session of
// several chats: InputNeeded while any chat waits on somebody, else
// InProgress while any chat runs, else the default chat's activity; the
// read and archived bits are the session's own.
func (s *session) computeSummaryLocked() protocol.SessionSummary {
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
		Changes:            s.summary.Changes,
		Meta:               st.Meta,
	}
	var deflt *chats.Chat
	list := make([]*chats.Chat, 0, len(s.order))
	for _, uri := range s.order {
		c := s.chats[uri].chat
		if cs := c.State(); cs.ModifiedAt > sum.ModifiedAt {
			sum.ModifiedAt = cs.ModifiedAt
		}
		if st.DefaultChat != nil && *st.DefaultChat == uri {
			deflt = c
			list = append([]*chats.Chat{c}, list...) // the default chat decides ties
		} else {
			list = append(list, c)
		}
	}
	activity, by := protocol.StatusIdle, deflt
	if deflt != nil {
		activity = deflt.State().Status.Activity()
	}
	found := false
	for _, want := range []protocol.SessionStatus{protocol.StatusInputNeeded, protocol.StatusInProgress} {
		for _, c := range list {
			if c.State().Status.Activity() == want {
				activity, by, found = want, c, true
				break
			}
		}
		if found {
			break
		}
	}
	if len(st.InputNeeded) > 0 {
		activity = protocol.StatusInputNeeded
	}
	if activity == 0 {
		activity = protocol.StatusIdle
	}
	sum.Status = st.Status.WithActivity(activity)
	sum.Activity = st.Activity
	if by != nil && by.State().Activity != nil {
		sum.Activity = by.State().Activity
	}
	return sum
}

// refreshSummaryLocked recomputes the catalogue row and tells every client
// what changed, once the session is announced. modifiedAt only moves
// forward.
func (s *session) refreshSummaryLocked() {
	next := s.computeSummaryLocked()
	if next.ModifiedAt < s.summary.ModifiedAt {
		next.ModifiedAt = s.summary.ModifiedAt
	}
	changes, changed := summaryChanges(s.summary, next)
	s.summary = next
	s.rec.ModifiedAt = next.ModifiedAt
	if changed && s.announced {
		s.h.bus.notify(protocol.RootURI, "root/sessionSummaryChanged", &protocol.SessionSummaryChangedParams{
			Channel: protocol.RootURI, Session: s.uri, Changes: changes,
		}, nil)
	}
}

// summaryChanges lists the mutable fields that differ; identity fields
// (resource, provider, createdAt) never change.
func summaryChanges(a, b protocol.SessionSummary) (protocol.PartialSessionSummary, bool) {
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
	if !sameJSON(a.Changes, b.Changes) && b.Changes != nil {
		ch.Changes, changed = b.Changes, true
	}
	if !sameJSON(a.Project, b.Project) && b.Project != nil {
		ch.Project, changed = b.Project, true
	}
	if !sameJSON(a.Meta, b.Meta) && b.Meta != nil {
		ch.Meta, changed = b.Meta, true
	}
	return ch, changed
}

// sameJSON compares two values by their JSON encoding.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// updateActiveLocked keeps root's count of sessions running a turn.
func (s *session) updateActiveLocked() {
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
	s.h.addActive(delta)
}
