package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/chats"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestRootApprovals: the approval settings VS Code mirrors into root
// config are declared, and decide every session's calls over its own
// permissions: the terminal rules run the commands they approve, the
// host's deny refuses, global auto approve runs the rest, each shown with
// its rule; a running agent takes a change at once; a value that cannot
// be read is refused, saying why.
func TestRootApprovals(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	root := c.Subscribe(protocol.RootURI).State.(*protocol.RootState)
	for _, k := range []string{"permissions", "globalAutoApproveEnabled", "terminalAutoApproveEnabled", "terminalAutoApproveRules", "autoReplyEnabled", "mcpServers"} {
		if _, ok := root.Config.Schema.Properties.Get(k); !ok {
			t.Errorf("root config does not declare %s", k)
		}
	}
	setRoot := func(config protocol.Object) {
		t.Helper()
		seq := c.Dispatch(protocol.RootURI, &protocol.RootConfigChangedAction{Config: config})
		c.Wait("the root change", func(msgs []hosttest.Message) bool {
			for _, e := range echoes(msgs, protocol.RootURI) {
				if e.Origin != nil && e.Origin.ClientSeq == seq {
					if e.RejectionReason != nil {
						t.Fatalf("root change refused: %s", *e.RejectionReason)
					}
					return true
				}
			}
			return false
		})
	}
	setRoot(protocol.Object{
		"terminalAutoApproveRules": jsontext.Value(`{"echo": true, "rm": false}`),
		"permissions":              jsontext.Value(`{"allow": [], "deny": ["write(secret*)"]}`),
	})

	_, chat := th.newSession(c, "s1", map[string]any{"permissions": map[string]any{"mode": "ask"}})
	cs := send(t, c, chat, "t1", "run echo hi && echo there\nwrite secret.txt x\nsay done")
	parts := cs.Turns[0].ResponseParts
	ran, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
	if !ok || ran.Confirmed != protocol.ToolCallConfirmationReasonSetting || string(ran.Meta["ahpd.permission"]) != `"host terminal \"echo\""` {
		t.Errorf("the command the terminal rules approve: %+v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}
	denied, ok := parts[1].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState)
	if !ok || denied.Reason != protocol.ToolCallCancellationReasonDenied || string(denied.Meta["ahpd.permission"]) != `"host deny \"write(secret*)\""` {
		t.Errorf("the write the host denies: %+v", parts[1].(*protocol.ToolCallResponsePart).ToolCall)
	}
	if _, err := os.Stat(filepath.Join(th.work, "secret.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied write was done (%v)", err)
	}

	// A command no rule approves asks; global auto approve, set while the
	// agent runs, lets the next one through.
	startTaken(t, c, chat, "t2", "run echo hi > out.txt\nsay two")
	id := pendingTool(t, c, chat)
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t2", ToolCallID: id, Approved: false,
		Reason: new(protocol.ToolCallCancellationReasonDenied)})
	waitTurnEnd(t, c, chat, "t2")
	setRoot(protocol.Object{"globalAutoApproveEnabled": jsontext.Value(`true`)})
	cs = send(t, c, chat, "t3", "write b.txt y\nsay three")
	last := cs.Turns[len(cs.Turns)-1].ResponseParts
	if w, ok := last[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState); !ok || string(w.Meta["ahpd.permission"]) != `"host allowAll"` {
		t.Errorf("the write under global auto approve: %+v", last[0].(*protocol.ToolCallResponsePart).ToolCall)
	}

	// Auto reply answers a question at once, for a person not there; the
	// turn shows the question and its answer.
	setRoot(protocol.Object{"autoReplyEnabled": jsontext.Value(`true`)})
	cs = send(t, c, chat, "t4", "ask Which branch?")
	last = cs.Turns[len(cs.Turns)-1].ResponseParts
	if got := text(last); !strings.Contains(got, chats.AutoReplyAnswer) {
		t.Errorf("the question auto-replied: the turn said %q", got)
	}
	var asked *protocol.InputRequestResponsePart
	for _, p := range last {
		if ir, ok := p.(*protocol.InputRequestResponsePart); ok {
			asked = ir
		}
	}
	if asked == nil || asked.Request.Answers.Len() != 1 {
		t.Errorf("the turn does not show the question answered: %+v", asked)
	}

	// Refused, saying why, when nothing of the change can be taken.
	for _, tc := range []struct {
		config protocol.Object
		want   string
	}{
		{protocol.Object{"terminalAutoApproveRules": jsontext.Value(`{"ls": "yes"}`)}, "terminalAutoApproveRules: terminal rule"},
		{protocol.Object{"globalAutoApproveEnabled": jsontext.Value(`"yes"`)}, "globalAutoApproveEnabled takes true or false"},
		{protocol.Object{"permissions": jsontext.Value(`{"mode": "bypass"}`)}, "a mode is each session's own"},
		{protocol.Object{"mcpServers": jsontext.Value(`{"x": {"type": "stdio"}}`)}, "mcpServers: MCP server x: a stdio server has a command"},
	} {
		seq := c.Dispatch(protocol.RootURI, &protocol.RootConfigChangedAction{Config: tc.config})
		var reason string
		c.Wait("the refusal", func(msgs []hosttest.Message) bool {
			for _, e := range echoes(msgs, protocol.RootURI) {
				if e.Origin != nil && e.Origin.ClientSeq == seq {
					if e.RejectionReason != nil {
						reason = *e.RejectionReason
					}
					return true
				}
			}
			return false
		})
		if !strings.Contains(reason, tc.want) {
			t.Errorf("%v refused with %q, want it to say %q", tc.config, reason, tc.want)
		}
	}
}
