package claude_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

// TestFileEdits has the CLI write a new file, edit it, and fail an edit,
// each confirmed by a person: the calls that succeeded complete with the
// CLI's text and a fileEdit content, a creation with no before side and
// an edit with the file before carried, with their line counts, as
// chat/toolCallComplete actions the 1.0 schema takes; the failed one has
// no fileEdit.
func TestFileEdits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	path := filepath.Join(f.dir, "claude.txt")
	uri := plugins.FileURI(path)
	f.mock.Enqueue(
		claudetest.Write("toolu_create", path, "one\ntwo\n"), claudetest.Text("Created."),
		claudetest.ToolUse("", "toolu_edit", "Edit", map[string]any{"file_path": path, "old_string": "two", "new_string": "TWO\nthree"}), claudetest.Text("Edited."),
		claudetest.ToolUse("", "toolu_fail", "Edit", map[string]any{"file_path": path, "old_string": "not there", "new_string": "x"}), claudetest.Text("That failed."),
	)

	// done runs a turn whose one tool call a person allows, and returns
	// its result, checked against the schema as the host would send it.
	done := func(turnID, text string) protocol.ToolCallResult {
		t.Helper()
		turn := pluginstest.NewTurn(turnID)
		turn.Confirms <- true
		if err := prompt(t, a, turn, text); err != nil {
			t.Fatalf("Prompt: %v", err)
		}
		dones := turn.Of("toolDone")
		if len(dones) != 1 {
			t.Fatalf("%s: %d tool results", turnID, len(dones))
		}
		protocoltest.Validate(t, "ChatToolCallCompleteAction", &protocol.ChatToolCallCompleteAction{
			TurnID: turnID, ToolCallID: dones[0].Text, Result: dones[0].Result,
		})
		return dones[0].Result
	}
	fileEdit := func(r protocol.ToolCallResult) *protocol.ToolResultFileEditContent {
		t.Helper()
		if len(r.Content) != 2 {
			t.Fatalf("the result has %d contents, want its text and a fileEdit: %+v", len(r.Content), r.Content)
		}
		if _, ok := r.Content[0].(*protocol.ToolResultTextContent); !ok {
			t.Errorf("the first content is %T, want the CLI's text", r.Content[0])
		}
		fe, ok := r.Content[1].(*protocol.ToolResultFileEditContent)
		if !ok {
			t.Fatalf("the second content is %T, want a fileEdit", r.Content[1])
		}
		return fe
	}
	stats := func(fe *protocol.ToolResultFileEditContent) (int64, int64) {
		t.Helper()
		if fe.Diff == nil || fe.Diff.Added == nil || fe.Diff.Removed == nil {
			t.Fatalf("no diff stats: %+v", fe.Diff)
		}
		return *fe.Diff.Added, *fe.Diff.Removed
	}

	created := fileEdit(done("turn-1", "write claude.txt"))
	if created.Before != nil {
		t.Errorf("a created file has a before side: %+v", created.Before)
	}
	if created.After == nil || created.After.URI != uri || created.After.Content.URI != uri {
		t.Errorf("the created file's after side = %+v, want %s", created.After, uri)
	}
	if added, removed := stats(created); added != 2 || removed != 0 {
		t.Errorf("created +%d -%d, want +2 -0", added, removed)
	}

	edited := fileEdit(done("turn-2", "edit claude.txt"))
	want := "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte("one\ntwo\n"))
	if edited.Before == nil || edited.Before.URI != uri || edited.Before.Content.URI != want {
		t.Errorf("the edited file's before side = %+v, want %s with its old content", edited.Before, uri)
	}
	if edited.After == nil || edited.After.URI != uri || edited.After.Content.URI != uri {
		t.Errorf("the edited file's after side = %+v", edited.After)
	}
	if added, removed := stats(edited); added != 2 || removed != 1 {
		t.Errorf("edited +%d -%d, want +2 -1", added, removed)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "one\nTWO\nthree\n" {
		t.Errorf("the file holds %q (%v)", data, err)
	}

	failed := done("turn-3", "edit claude.txt again")
	if failed.Success {
		t.Fatalf("the edit of a missing string succeeded: %+v", failed)
	}
	for _, c := range failed.Content {
		if _, ok := c.(*protocol.ToolResultFileEditContent); ok {
			t.Errorf("a failed edit carries a fileEdit: %+v", c)
		}
	}
}
