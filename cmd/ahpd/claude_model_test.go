package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/protocol"
)

// TestClaudeModelPicker is VS Code's model picker over the wire: root
// lists Claude's models, the session config offers no model of its own,
// and each turn runs on the model its message picks, in the one CLI
// process, with the turn's usage naming the model that answered.
func TestClaudeModelPicker(t *testing.T) {
	t.Parallel()
	f := newClaudeFixture(t)
	p := f.serve(t)
	c := connect(t, p, f.e.token(t), "c1")

	a, ok := agentNamed(t, c, "claude")
	if !ok {
		t.Fatal("claude is not listed")
	}
	var models []string
	for _, m := range a.Models {
		models = append(models, m.ID)
	}
	if want := []string{"default", "sonnet", "opus", "haiku"}; !slices.Equal(models, want) {
		t.Errorf("claude's models are %q, want %q", models, want)
	}
	var resolved protocol.ResolveSessionConfigResult
	if err := json.Unmarshal(c.MustCall("resolveSessionConfig", map[string]any{"channel": protocol.RootURI, "provider": "claude"}), &resolved); err != nil {
		t.Fatal(err)
	}
	if _, ok := resolved.Schema.Properties.Get("model"); ok {
		t.Error("the session config offers a model: VS Code would show a second picker")
	}
	if _, ok := resolved.Schema.Properties.Get("permissionMode"); !ok {
		t.Error("the session config lost claude's own keys")
	}

	_, chat := f.newChat(t, c, "picker")
	var pids []int
	for i, step := range []struct{ picked, want, reply string }{
		{"haiku", "claude-haiku", "Haiku here."},
		{"sonnet", "claude-sonnet", "Sonnet here."},
	} {
		f.mock.Enqueue(claudetest.Text(step.reply))
		turnID := newTurnID()
		c.Dispatch(chat, &protocol.ChatTurnStartedAction{
			TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{
				Text:   "who are you?",
				Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser},
				Model:  &protocol.ModelSelection{ID: step.picked},
			},
		})
		turn := awaitTurnEnd(t, c, chat, turnID)
		if turn.State != protocol.TurnStateComplete || text(turn.ResponseParts) != step.reply {
			t.Fatalf("turn %d: %s", i, turnSummary(turn))
		}
		reqs := f.mock.Requests()
		if len(reqs) != i+1 {
			t.Fatalf("after turn %d the mock has %d model calls", i, len(reqs))
		}
		asked := reqs[i].Model
		if !strings.HasPrefix(asked, step.want) {
			t.Errorf("turn %d picking %q asked the API for %q, want %s…", i, step.picked, asked, step.want)
		}
		if turn.Usage == nil || turn.Usage.Model == nil || *turn.Usage.Model != asked {
			t.Errorf("turn %d's usage is %+v, want it to name %q", i, turn.Usage, asked)
		}
		got := f.waitCLIs(t, f.e.work, 1, "after a turn")
		if pids != nil && !slices.Equal(got, pids) {
			t.Errorf("turn %d ran in CLI %v, the first in %v: the CLI was restarted to switch", i, got, pids)
		}
		pids = got
	}
}
