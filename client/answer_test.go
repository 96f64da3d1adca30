package client_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// request is an input request with one question of each kind.
func request() *protocol.ChatInputRequest {
	opts := []protocol.ChatInputOption{{ID: "a", Label: "Alpha"}, {ID: "b", Label: "Beta"}}
	return &protocol.ChatInputRequest{ID: "r1", Questions: []protocol.ChatInputQuestion{
		&protocol.ChatInputTextQuestion{ID: "name", Message: "Name?", Required: new(true), Max: new(int64(5))},
		&protocol.ChatInputNumberQuestion{ID: "count", Message: "How many?", Kind: "integer", Min: new(1.0)},
		&protocol.ChatInputBooleanQuestion{ID: "sure", Message: "Sure?"},
		&protocol.ChatInputSingleSelectQuestion{ID: "one", Message: "Which?", Options: opts},
		&protocol.ChatInputMultiSelectQuestion{ID: "many", Message: "Which ones?", Options: opts, AllowFreeformInput: new(true), Max: new(int64(2))},
	}}
}

func answersJSON(t *testing.T, act *protocol.ChatInputCompletedAction) string {
	t.Helper()
	data, err := json.Marshal(act)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAccept(t *testing.T) {
	act, err := client.Accept(request(), client.Answers{
		"name": {"ada"}, "count": {"3"}, "sure": {"yes"}, "one": {"beta"}, "many": {"1, custom"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if act.RequestID != "r1" || act.Response != protocol.ChatInputResponseKindAccept {
		t.Errorf("action %+v", act)
	}
	got := answersJSON(t, act)
	for _, want := range []string{
		`"name":{"state":"submitted","value":{"kind":"text","value":"ada"}}`,
		`"count":{"state":"submitted","value":{"kind":"number","value":3}}`,
		`"sure":{"state":"submitted","value":{"kind":"boolean","value":true}}`,
		`"one":{"state":"submitted","value":{"kind":"selected","value":"b"}}`,
		`"many":{"state":"submitted","value":{"kind":"selected-many","value":["a"],"freeformValues":["custom"]}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("answers %s lack %s", got, want)
		}
	}
	// What is left out is skipped.
	act, err = client.Accept(request(), client.Answers{"name": {"mo"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := answersJSON(t, act); !strings.Contains(got, `"sure":{"state":"skipped"}`) {
		t.Errorf("a question left out: %s", got)
	}
}

func TestAcceptRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		given client.Answers
		want  string
	}{
		{"required", client.Answers{"count": {"2"}}, `the answer to "name" is missing, and the question is required`},
		{"too long", client.Answers{"name": {"abcdefgh"}}, "at most 5"},
		{"not a number", client.Answers{"name": {"a"}, "count": {"many"}}, `"many", which is not a number`},
		{"not whole", client.Answers{"name": {"a"}, "count": {"1.5"}}, "whole number"},
		{"below min", client.Answers{"name": {"a"}, "count": {"0"}}, "at least 1"},
		{"not yes or no", client.Answers{"name": {"a"}, "sure": {"maybe"}}, "answer yes or no"},
		{"no such option", client.Answers{"name": {"a"}, "one": {"gamma"}}, "none of the options: 1 Alpha, 2 Beta"},
		{"too many", client.Answers{"name": {"a"}, "many": {"a", "b", "c"}}, "at most 2"},
		{"no such question", client.Answers{"name": {"a"}, "colour": {"red"}}, `no question "colour"`},
		{"two values", client.Answers{"name": {"a", "b"}}, "takes one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Accept(request(), tt.given)
			var ae *client.AnswerError
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Accept = %v, want %q", err, tt.want)
			}
			if !asAnswerError(err, &ae) {
				t.Errorf("%T is no *AnswerError", err)
			}
		})
	}
}

func asAnswerError(err error, target **client.AnswerError) bool {
	ae, ok := err.(*client.AnswerError)
	*target = ae
	return ok
}

func TestSole(t *testing.T) {
	one := &protocol.ChatInputRequest{ID: "q", Questions: []protocol.ChatInputQuestion{&protocol.ChatInputTextQuestion{ID: "answer", Message: "Which file?"}}}
	if a, err := client.Sole(one, "notes.txt"); err != nil || a["answer"][0] != "notes.txt" {
		t.Errorf("Sole = %v, %v", a, err)
	}
	if _, err := client.Sole(request(), "x"); err == nil || !strings.Contains(err.Error(), "asks 5 questions (name, count, sure, one, many)") {
		t.Errorf("Sole of several = %v", err)
	}
	url := &protocol.ChatInputRequest{ID: "u"}
	if _, err := client.Sole(url, "x"); err == nil {
		t.Error("an answer to a request of no question was taken")
	}
}

func TestConfirm(t *testing.T) {
	tc := &protocol.ToolCallPendingConfirmationState{ToolCallID: "t1", Options: []protocol.ConfirmationOption{
		{ID: "once", Label: "Allow once", Kind: protocol.ConfirmationOptionKindApprove},
		{ID: "always", Label: "Allow in this session", Kind: protocol.ConfirmationOptionKindApprove},
		{ID: "no", Label: "Deny", Kind: protocol.ConfirmationOptionKindDeny},
	}}
	act, err := client.Confirm("turn", tc, true, "")
	if err != nil || !act.Approved || act.Confirmed == nil || *act.Confirmed != protocol.ToolCallConfirmationReasonUserAction || act.SelectedOptionID != nil {
		t.Errorf("approve = %+v, %v", act, err)
	}
	act, err = client.Confirm("turn", tc, false, "")
	if err != nil || act.Approved || act.Reason == nil || *act.Reason != protocol.ToolCallCancellationReasonDenied {
		t.Errorf("deny = %+v, %v", act, err)
	}
	if act, err := client.Confirm("turn", tc, true, "Allow in this session"); err != nil || *act.SelectedOptionID != "always" {
		t.Errorf("approve with an option by label = %+v, %v", act, err)
	}
	if _, err := client.Confirm("turn", tc, false, "always"); err == nil || !strings.Contains(err.Error(), "it offers no (Deny)") {
		t.Errorf("deny with an approving option = %v", err)
	}
	if _, err := client.Confirm("turn", &protocol.ToolCallPendingConfirmationState{ToolCallID: "t2"}, true, "x"); err == nil || !strings.Contains(err.Error(), "leave the option out") {
		t.Errorf("an option of a call offering none = %v", err)
	}
}

func TestFind(t *testing.T) {
	ask := &protocol.InputRequestResponsePart{Request: protocol.ChatInputRequest{ID: "q1", Message: new("Which?")}}
	answered := &protocol.InputRequestResponsePart{Request: protocol.ChatInputRequest{ID: "q0"}, Response: new(protocol.ChatInputResponseKindAccept)}
	pending := &protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallPendingConfirmationState{ToolCallID: "t1", DisplayName: "Write", InvocationMessage: protocol.StringOrMarkdown{Text: "Write `a.txt`"}}}
	// A call the session's permissions deny passes through
	// pending-confirmation: it waits on nobody.
	denying := &protocol.ToolCallResponsePart{ToolCall: &protocol.ToolCallPendingConfirmationState{ToolCallID: "t0", DisplayName: "Run",
		Meta: protocol.Object{"ahpd.permission": []byte(`"deny \"execute\""`)}}}
	cs := &protocol.ChatState{Resource: "chat",
		Turns:      []protocol.Turn{{ID: "old", ResponseParts: []protocol.ResponsePart{&protocol.InputRequestResponsePart{Request: protocol.ChatInputRequest{ID: "q-old"}}}}},
		ActiveTurn: &protocol.ActiveTurn{ID: "now", ResponseParts: []protocol.ResponsePart{answered, denying, ask, pending}},
	}
	ws := client.WaitingIn(cs)
	if len(ws) != 2 || ws[0].ID != "q1" || ws[0].Kind() != "question" || ws[0].Text() != "Which?" ||
		ws[1].ID != "t1" || ws[1].Kind() != "approval" || ws[1].Text() != "Write: Write `a.txt`" || ws[1].TurnID != "now" {
		t.Fatalf("WaitingIn = %+v", ws)
	}
	for id, want := range map[string]client.Found{"q1": client.FoundOpen, "t1": client.FoundOpen, "q0": client.FoundSettled, "q-old": client.FoundEnded, "nope": client.NotFound} {
		if _, got := client.Find(cs, id); got != want {
			t.Errorf("Find(%s) = %v, want %v", id, got, want)
		}
	}
}
