package events

import (
	"reflect"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestRequestOf reads what a session waits on as a person would be told
// it: a question's text and questions, a tool call's tool, what it would
// do and the options it offers.
func TestRequestOf(t *testing.T) {
	yes := true
	msg := "Pick one"
	tests := []struct {
		name string
		in   protocol.SessionInputRequest
		want *Request
	}{
		{"one question", &protocol.SessionChatInputRequest{ID: "ask-1", Chat: "c", Request: protocol.ChatInputRequest{
			ID: "ask-1", Questions: []protocol.ChatInputQuestion{&protocol.ChatInputTextQuestion{ID: "answer", Message: "Which file?", Required: &yes}},
		}}, &Request{ID: "ask-1", Kind: RequestQuestion, Text: "Which file?", Questions: []Question{{ID: "answer", Kind: "text", Message: "Which file?", Required: true}}}},
		{"several, with a message", &protocol.SessionChatInputRequest{ID: "ask-2", Request: protocol.ChatInputRequest{
			ID: "ask-2", Message: &msg, Questions: []protocol.ChatInputQuestion{
				&protocol.ChatInputSingleSelectQuestion{ID: "color", Message: "Color?", Options: []protocol.ChatInputOption{{ID: "r", Label: "Red"}}},
				&protocol.ChatInputNumberQuestion{ID: "n", Message: "How many?", Kind: "integer"},
				&protocol.ChatInputBooleanQuestion{ID: "b", Message: "Sure?"},
			},
		}}, &Request{ID: "ask-2", Kind: RequestQuestion, Text: "Pick one", Questions: []Question{
			{ID: "color", Kind: "single-select", Message: "Color?", Options: []Option{{ID: "r", Label: "Red"}}},
			{ID: "n", Kind: "integer", Message: "How many?"},
			{ID: "b", Kind: "boolean", Message: "Sure?"},
		}}},
		{"several, joined", &protocol.SessionChatInputRequest{ID: "ask-3", Request: protocol.ChatInputRequest{
			ID: "ask-3", Questions: []protocol.ChatInputQuestion{
				&protocol.ChatInputTextQuestion{ID: "a", Message: "Name?"},
				&protocol.ChatInputMultiSelectQuestion{ID: "b", Message: "Tags?"},
			},
		}}, &Request{ID: "ask-3", Kind: RequestQuestion, Text: "Name? / Tags?", Questions: []Question{
			{ID: "a", Kind: "text", Message: "Name?"}, {ID: "b", Kind: "multi-select", Message: "Tags?"},
		}}},
		{"a tool call", &protocol.SessionToolConfirmationRequest{ID: "tool-1", TurnID: "t1", ToolCall: &protocol.ToolCallPendingConfirmationState{
			ToolCallID: "tool-1", ToolName: "write", DisplayName: "Write", InvocationMessage: protocol.Plain("Write `notes.txt`"),
			Options: []protocol.ConfirmationOption{{ID: "always", Label: "Allow in this session", Kind: "approve"}},
		}}, &Request{ID: "tool-1", Kind: RequestApproval, Text: "Write: Write `notes.txt`", Tool: "write", Options: []Option{{ID: "always", Label: "Allow in this session", Kind: "approve"}}}},
		{"a tool's result", &protocol.SessionToolConfirmationRequest{ID: "tool-2", ToolCall: &protocol.ToolCallPendingResultConfirmationState{
			ToolCallID: "tool-2", ToolName: "run", PastTenseMessage: protocol.Plain("Ran ls"),
		}}, &Request{ID: "tool-2", Kind: RequestApproval, Text: "run: Ran ls", Tool: "run"}},
		{"a kind this version does not know", &protocol.SessionToolAuthenticationRequest{ID: "auth"}, nil},
	}
	for _, tt := range tests {
		if got := RequestOf(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
