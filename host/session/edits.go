package session

import (
	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/protocol"
)

// Edits: the files a chat's tools were seen to write, from the file edits
// their results carry. A chat other than the default is counted by them,
// and so is a session whose folder is no git repository, which has no
// checkpoints to diff. They are held in memory: after a restart a chat
// keeps the counts it was stored with until its next edit.

// edit is what a chat's tools wrote to one file.
type edit struct{ added, removed int64 }

// noteEditsLocked records the file edits a finished tool call reports.
func (e *ChatEntry) noteEditsLocked(result protocol.ToolCallResult) {
	for _, c := range result.Content {
		fe, ok := c.(*protocol.ToolResultFileEditContent)
		if !ok {
			continue
		}
		var uri string
		switch {
		case fe.After != nil:
			uri = fe.After.URI
		case fe.Before != nil:
			uri = fe.Before.URI
		default:
			continue
		}
		if e.edits == nil {
			e.edits = map[string]edit{}
		}
		ed := e.edits[uri]
		if fe.Diff != nil && fe.Diff.Added != nil {
			ed.added += *fe.Diff.Added
		}
		if fe.Diff != nil && fe.Diff.Removed != nil {
			ed.removed += *fe.Diff.Removed
		}
		e.edits[uri] = ed
	}
}

// countEditsLocked brings the counts that come from edits up to date once
// a turn of c has ended: c's own, when it is not the default chat, and
// the session's, when it has no repository to count from.
func (s *Session) countEditsLocked(c *chats.Chat) {
	e := s.chats[c.URI()]
	if e == nil {
		return
	}
	isDefault := s.state.DefaultChat != nil && *s.state.DefaultChat == c.URI()
	if !isDefault && len(e.edits) > 0 {
		s.setChatChangesLocked(c.URI(), countOf(e.edits))
	}
	if !s.rec.Untracked {
		return
	}
	all := map[string]edit{}
	for _, e := range s.chats {
		for uri, ed := range e.edits {
			sum := all[uri]
			sum.added += ed.added
			sum.removed += ed.removed
			all[uri] = sum
		}
	}
	if len(all) > 0 {
		s.setChangesLocked(countOf(all))
	}
}

func countOf(edits map[string]edit) *protocol.ChangesSummary {
	var added, removed int64
	for _, ed := range edits {
		added += ed.added
		removed += ed.removed
	}
	return changesOf(len(edits), int(added), int(removed))
}
