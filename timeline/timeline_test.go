package timeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

func TestOf(t *testing.T) {
	const chat = "ahp-chat://default/czE"
	user := protocol.Message{Text: "fix the build", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	tests := []struct {
		name   string
		action protocol.Action
		kinds  string
		text   string
	}{
		{"a person's turn", &protocol.ChatTurnStartedAction{TurnID: "t1", Message: user}, "turn_started human_input", "fix the build"},
		{"streamed text is no event", &protocol.ChatDeltaAction{TurnID: "t1", PartID: "p", Content: "hi"}, "", ""},
		{"a tool", &protocol.ChatToolCallStartAction{TurnID: "t1", ToolCallID: "c1", ToolName: "write", DisplayName: "Write notes.txt"}, "tool_call", "Write notes.txt"},
		{"a tool's result with edits", &protocol.ChatToolCallCompleteAction{TurnID: "t1", ToolCallID: "c1", Result: protocol.ToolCallResult{
			Success: true, PastTenseMessage: protocol.Plain("Wrote notes.txt"),
			Content: []protocol.ToolResultContent{&protocol.ToolResultFileEditContent{}}}}, "tool_result artifact", "Wrote notes.txt"},
		{"a model round", &protocol.ChatUsageAction{TurnID: "t1", Usage: protocol.UsageInfo{Model: new("opus")}}, "llm_call", "opus"},
		{"an approval", &protocol.ChatToolCallConfirmedAction{TurnID: "t1", ToolCallID: "c1", Approved: true}, "human_input", "approved tool call c1"},
		{"a failure", &protocol.ChatErrorAction{TurnID: "t1", Part: protocol.ErrorResponsePart{Error: protocol.ErrorInfo{ErrorType: "agent", Message: "it broke"}}}, "turn_failed error", "it broke"},
		{"a question", &protocol.ChatInputRequestedAction{Request: protocol.ChatInputRequest{ID: "r1", Message: new("Which branch?")}}, "question", "Which branch?"},
		{"a question by its questions", &protocol.ChatInputRequestedAction{Request: protocol.ChatInputRequest{ID: "r1", Questions: []protocol.ChatInputQuestion{
			&protocol.ChatInputTextQuestion{ID: "q", Message: "Which file?"}}}}, "question", "Which file?"},
		{"an end", &protocol.ChatTurnCompleteAction{TurnID: "t1"}, "turn_completed", ""},
		{"a status", &protocol.SessionChatUpdatedAction{Chat: chat, Changes: protocol.PartialChatSummary{Status: new(protocol.StatusInputNeeded)}}, "transition", "needs input"},
		{"a title", &protocol.SessionChatUpdatedAction{Chat: chat, Changes: protocol.PartialChatSummary{Title: new("x")}}, "", ""},
		{"a long message is cut", &protocol.ChatTurnStartedAction{TurnID: "t2", Message: protocol.Message{Text: strings.Repeat("é", 400), Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}, "turn_started human_input", "…"},
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := timeline.Of(protocol.ActionEnvelope{Channel: chat, ServerSeq: 42, Action: tc.action}, at)
			var kinds []string
			for _, e := range events {
				kinds = append(kinds, string(e.Kind))
				if e.Seq != 42 || !e.Time.Equal(at) || len(e.Actions) != 1 || e.Actions[0] != 42 || e.Channel != chat {
					t.Errorf("event %+v", e)
				}
				if len(e.Text) > 503 || !strings.Contains(e.Text, tc.text) {
					t.Errorf("text %q (%d bytes), want it to hold %q", e.Text, len(e.Text), tc.text)
				}
			}
			if got := strings.Join(kinds, " "); got != tc.kinds {
				t.Errorf("kinds %q, want %q", got, tc.kinds)
			}
		})
	}
}
