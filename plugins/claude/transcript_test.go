package claude_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// TestTurns reads back the transcript the CLI wrote for turns of every
// kind: text with reasoning, an allowed and a denied tool call, an
// interrupted turn, a failed model call, and a turn whose id the
// conversation had used already.
func TestTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	path := filepath.Join(f.dir, "notes.txt")
	f.mock.Enqueue(
		claudetest.Thinking("Thinking it over.", "Hello **there**."),
		claudetest.Write("toolu_allowed", path, "some notes\n"),
		claudetest.Text("Wrote the notes."),
		claudetest.Write("toolu_denied", filepath.Join(f.dir, "denied.txt"), "no\n"),
		claudetest.Text("Fine, I won't."),
		claudetest.Response{Blocks: []claudetest.Block{{Type: "text", Text: strings.Repeat("and on ", 300)}}, ChunkSize: 7, ChunkDelay: 20 * time.Millisecond},
		claudetest.Error("the model is unwell"),
		claudetest.Write("toolu_unanswered", filepath.Join(f.dir, "unanswered.txt"), "no\n"),
		claudetest.Text("Same id again."),
	)

	run := func(turnID, text string, confirm ...bool) error {
		turn := pluginstest.NewTurn(turnID)
		for _, c := range confirm {
			turn.Confirms <- c
		}
		return prompt(t, a, turn, text)
	}
	if err := run("turn-1", "greet me"); err != nil {
		t.Fatalf("turn-1: %v", err)
	}
	if err := run("turn-2", "take notes", true); err != nil {
		t.Fatalf("turn-2: %v", err)
	}
	if err := run("turn-3", "write something else", false); err != nil {
		t.Fatalf("turn-3: %v", err)
	}
	interrupted := pluginstest.NewTurn("turn-4")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Prompt(ctx, userMessage("go on and on"), interrupted) }()
	<-interrupted.Texted()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("turn-4: %v", err)
	}
	if err := run("turn-5", "fail"); err == nil {
		t.Fatal("turn-5 succeeded")
	}
	unanswered := pluginstest.NewTurn("turn-6")
	ctx, cancel = context.WithCancel(context.Background())
	go func() { errc <- a.Prompt(ctx, userMessage("write, but never mind"), unanswered) }()
	<-unanswered.Asked()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("turn-6: %v", err)
	}
	// A turn id the conversation has used would make the CLI drop the
	// prompt as a duplicate; it is sent under a new one.
	if err := run("turn-1", "once more"); err != nil {
		t.Fatalf("turn-1 again: %v", err)
	}
	// The CLI has written all of its transcript once it has exited.
	a.Close()

	turns, err := f.backend.Turns(context.Background(), f.conv(id))
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	if len(turns) != 7 {
		t.Fatalf("Turns = %d turns, want 7: %+v", len(turns), turns)
	}
	for i, want := range []struct {
		id, text string
		state    protocol.TurnState
	}{
		{"turn-1", "greet me", protocol.TurnStateComplete},
		{"turn-2", "take notes", protocol.TurnStateComplete},
		{"turn-3", "write something else", protocol.TurnStateComplete},
		{"turn-4", "go on and on", protocol.TurnStateCancelled},
		{"turn-5", "fail", protocol.TurnStateError},
		{"turn-6", "write, but never mind", protocol.TurnStateCancelled},
		{"", "once more", protocol.TurnStateComplete},
	} {
		turn := turns[i]
		if want.id != "" && turn.ID != want.id || want.id == "" && (turn.ID == "" || turn.ID == "turn-1") {
			t.Errorf("turn %d: id %q, want %q", i, turn.ID, want.id)
		}
		if turn.Message.Text != want.text || turn.Message.Origin.Kind != protocol.MessageKindUser || turn.State != want.state {
			t.Errorf("turn %d: message %+v, state %s, want %q, %s", i, turn.Message, turn.State, want.text, want.state)
		}
		if turn.StartedAt == nil || turn.Duration == nil || *turn.Duration < 0 {
			t.Errorf("turn %d: started %v, duration %v", i, turn.StartedAt, turn.Duration)
		}
	}

	// Reasoning, then the text.
	if parts := turns[0].ResponseParts; len(parts) != 2 {
		t.Errorf("turn-1 parts = %#v", parts)
	} else {
		r, ok1 := parts[0].(*protocol.ReasoningResponsePart)
		md, ok2 := parts[1].(*protocol.MarkdownResponsePart)
		if !ok1 || !ok2 || r.Content != "Thinking it over." || md.Content != "Hello **there**." || r.ID == md.ID {
			t.Errorf("turn-1 parts = %#v, %#v", parts[0], parts[1])
		}
	}
	if u := turns[0].Usage; u == nil || u.InputTokens == nil || *u.InputTokens != 100 || u.OutputTokens == nil || *u.OutputTokens == 0 || u.Model == nil {
		t.Errorf("turn-1 usage = %+v", u)
	}

	// The allowed write completed, then the text.
	if parts := turns[1].ResponseParts; len(parts) != 2 {
		t.Errorf("turn-2 parts = %#v", parts)
	} else {
		done, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCompletedState)
		if !ok || done.ToolCallID != "toolu_allowed" || done.ToolName != "Write" || !done.Success ||
			done.InvocationMessage.Text != "Write `notes.txt`" || done.PastTenseMessage.Text != "Wrote `notes.txt`" ||
			done.ToolInput == nil || !strings.Contains(done.ToolInput.Inline, "some notes") || len(done.Content) != 1 {
			t.Errorf("turn-2 tool call = %#v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
		}
		if md, ok := parts[1].(*protocol.MarkdownResponsePart); !ok || md.Content != "Wrote the notes." {
			t.Errorf("turn-2 text = %#v", parts[1])
		}
	}

	// The denied write is cancelled as denied.
	if parts := turns[2].ResponseParts; len(parts) != 2 {
		t.Errorf("turn-3 parts = %#v", parts)
	} else if c, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState); !ok || c.ToolCallID != "toolu_denied" || c.Reason != protocol.ToolCallCancellationReasonDenied {
		t.Errorf("turn-3 tool call = %#v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}

	// The interrupted turn keeps the text it got.
	if parts := turns[3].ResponseParts; len(parts) != 1 {
		t.Errorf("turn-4 parts = %#v", parts)
	} else if md, ok := parts[0].(*protocol.MarkdownResponsePart); !ok || md.Content == "" || md.Content != interrupted.Response() {
		t.Errorf("turn-4 text = %#v, streamed %q", parts[0], interrupted.Response())
	}

	if e := turns[4].ErrorPart(); e == nil || !strings.Contains(e.Error.Message, "the model is unwell") || len(turns[4].ResponseParts) != 1 {
		t.Errorf("turn-5 error = %+v, parts %#v", e, turns[4].ResponseParts)
	}

	// The call the turn's cancel left unanswered was skipped with it.
	if parts := turns[5].ResponseParts; len(parts) != 1 {
		t.Errorf("turn-6 parts = %#v", parts)
	} else if c, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState); !ok || c.ToolCallID != "toolu_unanswered" || c.Reason != protocol.ToolCallCancellationReasonSkipped {
		t.Errorf("turn-6 tool call = %#v", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}

	// Lines that do not decode, such as a write cut short, are skipped.
	transcript := claude.TranscriptPath(a)
	file, err := os.OpenFile(transcript, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	file.WriteString("not json at all\n{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"cut sho")
	file.Close()
	again, err := f.backend.Turns(context.Background(), f.conv(id))
	if err != nil || len(again) != 7 {
		t.Errorf("Turns with garbage = %d turns, %v", len(again), err)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := newID()
	a := f.start(t, f.backend, id, false, nil)
	if err := prompt(t, a, pluginstest.NewTurn("turn-1"), "hello"); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	a.Close()
	transcript := claude.TranscriptPath(a)
	// Something else of the CLI's beside it must stay.
	other := filepath.Join(filepath.Dir(transcript), "other.jsonl")
	if err := os.WriteFile(other, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	if err := f.backend.Delete(ctx, f.conv(id)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(transcript); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the transcript is still there (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("Delete removed more than the transcript: %v", err)
	}
	if _, err := f.backend.Turns(ctx, f.conv(id)); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Turns after Delete = %v, want ErrNotFound", err)
	}
	if err := f.backend.Delete(ctx, f.conv(id)); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}
