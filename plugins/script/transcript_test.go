package script_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

func TestTranscript(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.backend.Turns(ctx, f.conv); !errors.Is(err, plugins.ErrNotFound) {
		t.Fatalf("Turns before any turn: %v, want ErrNotFound", err)
	}

	a := f.start(t, "")
	path := filepath.Join(f.transcript, f.conv.ID+".jsonl")

	// A completed turn with every kind of part.
	turn := pluginstest.NewTurn("")
	turn.Confirms <- true  // write a.txt
	turn.Confirms <- false // write b.txt
	turn.Confirms <- true  // run echo hi
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	answers.Set("answer", &protocol.ChatInputAnswered{State: "submitted", Value: &protocol.ChatInputTextAnswerValue{Value: "yes"}})
	turn.Answers <- plugins.Answer{Response: protocol.ChatInputResponseKindAccept, Answers: answers}
	if err := prompt(t, a, "think first\nsay hello there\nwrite a.txt A\nwrite b.txt B\nrun echo hi\nask Sure?", turn); err != nil {
		t.Fatal(err)
	}
	if got := countLines(t, path); got != 1 {
		t.Fatalf("%d transcript lines after one turn", got)
	}
	info, err := os.Stat(f.transcript)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("transcript directory: %v, %v", info.Mode(), err)
	}

	// A failed turn and a cancelled one are recorded too.
	if err := prompt(t, a, "say oops\nfail broken", pluginstest.NewTurn("")); err == nil {
		t.Fatal("fail did not fail")
	}
	cancelled := pluginstest.NewTurn("")
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(cctx, userMessage("write c.txt C"), cancelled) }()
	<-cancelled.Asked()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled turn: %v", err)
	}
	if got := countLines(t, path); got != 3 {
		t.Fatalf("%d transcript lines after three turns", got)
	}
	a.Close()

	// A crash may leave garbage and a line cut short.
	appendText(t, path, "not json\n{\"seq\":9,\"turn\":{\"id\":\"cut")

	// A new backend over the same directory reads the turns back.
	b := script.New(f.transcript)
	turns, err := b.Turns(ctx, f.conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 3 {
		t.Fatalf("read %d turns, want 3", len(turns))
	}
	for _, turn := range turns {
		protocoltest.Validate(t, "Turn", turn)
	}
	if skipped := script.SkippedLines(t, path); skipped != 2 {
		t.Errorf("skipped %d lines, want 2", skipped)
	}

	first := turns[0]
	if first.ID == "" || first.StartedAt == nil || first.Duration == nil || first.State != protocol.TurnStateComplete ||
		first.ErrorPart() != nil || !strings.HasPrefix(first.Message.Text, "think first") {
		t.Errorf("first turn = %+v", first)
	}
	parts := first.ResponseParts
	if len(parts) != 8 {
		t.Fatalf("first turn has %d parts: %#v", len(parts), parts)
	}
	if p, ok := parts[0].(*protocol.ReasoningResponsePart); !ok || p.Content != "first" {
		t.Errorf("part 0 = %#v", parts[0])
	}
	if p, ok := parts[1].(*protocol.MarkdownResponsePart); !ok || p.Content != "hello there\n\n" {
		t.Errorf("part 1 = %#v", parts[1])
	}
	if s := toolState(t, parts[2]); s == nil || s.ToolName != "write" || !s.Success ||
		s.Confirmed != protocol.ToolCallConfirmationReasonUserAction || s.ToolInput == nil || s.ToolInput.Inline == "" {
		t.Errorf("part 2 = %#v", s)
	}
	if tc, ok := parts[3].(*protocol.ToolCallResponsePart); !ok {
		t.Errorf("part 3 = %#v", parts[3])
	} else if c, ok := tc.ToolCall.(*protocol.ToolCallCancelledState); !ok || c.Reason != protocol.ToolCallCancellationReasonDenied {
		t.Errorf("denied write = %#v", tc.ToolCall)
	}
	if p, ok := parts[4].(*protocol.MarkdownResponsePart); !ok || p.Content != "Skipped writing `b.txt`: the write was denied.\n\n" {
		t.Errorf("part 4 = %#v", parts[4])
	}
	if s := toolState(t, parts[5]); s == nil || s.ToolName != "run" || !s.Success || s.Confirmed != protocol.ToolCallConfirmationReasonUserAction {
		t.Errorf("part 5 = %#v", s)
	}
	if p, ok := parts[6].(*protocol.InputRequestResponsePart); !ok || p.Response == nil || *p.Response != protocol.ChatInputResponseKindAccept || p.Request.Answers.Len() != 1 {
		t.Errorf("part 6 = %#v", parts[6])
	}
	if p, ok := parts[7].(*protocol.MarkdownResponsePart); !ok || p.Content != "yes\n\n" {
		t.Errorf("part 7 = %#v", parts[7])
	}

	if second := turns[1]; second.State != protocol.TurnStateError || second.ErrorPart() == nil || second.ErrorPart().Error.Message != "broken" {
		t.Errorf("second turn = %+v", second)
	}
	third := turns[2]
	if third.State != protocol.TurnStateCancelled || len(third.ResponseParts) != 1 {
		t.Fatalf("third turn = %+v", third)
	}
	if tc, ok := third.ResponseParts[0].(*protocol.ToolCallResponsePart); !ok {
		t.Errorf("third turn part = %#v", third.ResponseParts[0])
	} else if c, ok := tc.ToolCall.(*protocol.ToolCallCancelledState); !ok || c.Reason != protocol.ToolCallCancellationReasonSkipped {
		t.Errorf("open call of a cancelled turn = %#v", tc.ToolCall)
	}

	// Resuming appends after the cut line, with turn ids not used before.
	resumed, err := b.Start(ctx, plugins.StartOptions{Conversation: f.conv, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if err := prompt(t, resumed, "say again", pluginstest.NewTurn("")); err != nil {
		t.Fatal(err)
	}
	turns, err = b.Turns(ctx, f.conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 4 {
		t.Fatalf("read %d turns after resuming, want 4", len(turns))
	}
	seen := map[string]bool{}
	for _, turn := range turns {
		if seen[turn.ID] {
			t.Errorf("turn id %q used twice", turn.ID)
		}
		seen[turn.ID] = true
	}
	if turns[3].Message.Text != "say again" {
		t.Errorf("resumed turn = %+v", turns[3])
	}
}

func TestTranscriptLongLine(t *testing.T) {
	f := newFixture(t)
	a := f.start(t, "allow")
	big := strings.Repeat("0123456789", 20000) // 200 KB in one line
	if err := prompt(t, a, "write big.txt "+big, pluginstest.NewTurn("")); err != nil {
		t.Fatal(err)
	}
	turns, err := f.backend.Turns(context.Background(), f.conv)
	if err != nil || len(turns) != 1 {
		t.Fatalf("Turns = %d, %v", len(turns), err)
	}
	if !strings.Contains(turns[0].Message.Text, big) {
		t.Error("the long message did not survive")
	}
}

func TestTurnsReadError(t *testing.T) {
	f := newFixture(t)
	// A directory where the transcript should be cannot be read as one.
	if err := os.MkdirAll(filepath.Join(f.transcript, f.conv.ID+".jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := f.backend.Turns(context.Background(), f.conv)
	if err == nil || errors.Is(err, plugins.ErrNotFound) || !strings.Contains(err.Error(), f.conv.ID+".jsonl") {
		t.Errorf("err = %v, want a read error naming the transcript", err)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.backend.Delete(ctx, f.conv); err != nil {
		t.Fatalf("deleting an unknown conversation: %v", err)
	}
	a := f.start(t, "")
	if err := prompt(t, a, "say hi", pluginstest.NewTurn("")); err != nil {
		t.Fatal(err)
	}
	other := plugins.Conversation{ID: "other", Dir: f.conv.Dir}
	b, err := f.backend.Start(ctx, plugins.StartOptions{Conversation: other})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := prompt(t, b, "say hi", pluginstest.NewTurn("")); err != nil {
		t.Fatal(err)
	}

	if err := f.backend.Delete(ctx, f.conv); err != nil {
		t.Fatal(err)
	}
	if _, err := f.backend.Turns(ctx, f.conv); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Turns after Delete: %v, want ErrNotFound", err)
	}
	if turns, err := f.backend.Turns(ctx, other); err != nil || len(turns) != 1 {
		t.Errorf("the other conversation: %d turns, %v", len(turns), err)
	}
	if err := f.backend.Delete(ctx, f.conv); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
}

func toolState(t *testing.T, p protocol.ResponsePart) *protocol.ToolCallCompletedState {
	t.Helper()
	tc, ok := p.(*protocol.ToolCallResponsePart)
	if !ok {
		return nil
	}
	s, _ := tc.ToolCall.(*protocol.ToolCallCompletedState)
	return s
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func appendText(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
