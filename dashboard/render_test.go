package dashboard

import (
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestMarkdownIsSafe checks that what an agent writes cannot put markup
// or script in the page.
func TestMarkdownIsSafe(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		notWant []string
	}{
		{"hello **world**", []string{"<strong>world</strong>"}, nil},
		{"<script>alert(1)</script>", nil, []string{"<script"}},
		{"a <img src=x onerror=alert(1)> b", nil, []string{"<img", "onerror"}},
		{"[click](javascript:alert(1))", nil, []string{"javascript:"}},
		{"```\n<b>code</b>\n```", []string{"&lt;b&gt;code&lt;/b&gt;"}, []string{"<b>"}},
		{"| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>"}, nil},
	} {
		got := string(markdown(tc.in))
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("markdown(%q) = %q, lacks %q", tc.in, got, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(got, w) {
				t.Errorf("markdown(%q) = %q, has %q", tc.in, got, w)
			}
		}
	}
}

// TestStatusOf checks the words sessions are shown with.
func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		status    protocol.SessionStatus
		residency string
		want      string
	}{
		{protocol.StatusIdle, "active", statusIdle},
		{protocol.StatusIdle, "inactive", statusSleeping},
		{protocol.StatusIdle | protocol.StatusIsRead, "", statusIdle},
		{protocol.StatusInProgress, "active", statusRunning},
		{protocol.StatusInputNeeded, "active", statusNeedsInput},
		{protocol.StatusError, "inactive", statusFailed},
		{protocol.StatusInProgress | protocol.StatusIsArchived, "active", statusRunning},
	} {
		if got := statusOf(tc.status, tc.residency); got != tc.want {
			t.Errorf("statusOf(%d, %q) = %q, want %q", tc.status, tc.residency, got, tc.want)
		}
	}
}

// TestConversationOf checks how each kind of response part is drawn.
func TestConversationOf(t *testing.T) {
	msg := "Which file?"
	accept := protocol.ChatInputResponseKindAccept
	cs := &protocol.ChatState{
		Turns: []protocol.Turn{{ID: "t/1", Message: protocol.Message{Text: "do it"}, State: protocol.TurnStateError,
			ResponseParts: []protocol.ResponsePart{
				&protocol.MarkdownResponsePart{ID: "m1", Content: "Hello "},
				&protocol.MarkdownResponsePart{ID: "m2", Content: "**there**"},
				&protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallCompletedState{ToolCallID: "c1", ToolName: "run", DisplayName: "Run",
					InvocationMessage: protocol.Plain("Run ls"), ToolInput: &protocol.ToolInput{Inline: "ls -l"}, Success: true,
					PastTenseMessage: protocol.Plain("Ran ls"), Content: []protocol.ToolResultContent{&protocol.ToolResultTextContent{Text: "a.txt"}}}},
				&protocol.InputRequestResponsePart{Request: protocol.ChatInputRequest{ID: "q1", Message: &msg}, Response: &accept},
				&protocol.ErrorResponsePart{Error: protocol.ErrorInfo{Message: "it broke"}},
			}}},
		QueuedMessages: []protocol.PendingMessage{{ID: "q", Message: protocol.Message{Text: "next"}}},
	}
	v := conversationOf(cs)
	if len(v.Turns) != 2 || !v.Turns[1].Queued || v.Turns[0].Anchor != "turn-t_1" {
		t.Fatalf("turns %+v", v.Turns)
	}
	parts := v.Turns[0].Parts
	kinds := []string{}
	for _, p := range parts {
		kinds = append(kinds, p.Kind)
	}
	if strings.Join(kinds, ",") != "text,tool,question,error" {
		t.Fatalf("parts %v", kinds)
	}
	if !strings.Contains(string(parts[0].HTML), "Hello <strong>there</strong>") {
		t.Errorf("the text: %q", parts[0].HTML)
	}
	tool := parts[1].Tool
	if tool.Name != "Run" || tool.Input != "ls -l" || !strings.Contains(tool.Result, "Ran ls") || !strings.Contains(tool.Result, "a.txt") || tool.Failed {
		t.Errorf("the tool: %+v", tool)
	}
	if q := parts[2].Question; q.Text != "Which file?" || q.Response != "accept" {
		t.Errorf("the question: %+v", q)
	}
	if parts[3].Text != "it broke" {
		t.Errorf("the error: %+v", parts[3])
	}
	if len(conversationOf(nil).Turns) != 0 {
		t.Error("a nil chat has turns")
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", maxShown)
	got := clip(long)
	if len(got) > maxShown+64 || !strings.Contains(got, "cut:") || !strings.HasPrefix(got, "é") {
		t.Fatalf("clip: %d bytes, %q", len(got), got[len(got)-40:])
	}
	if clip("short") != "short" {
		t.Fatal("clip changed a short text")
	}
}
