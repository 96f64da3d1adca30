package catalogue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/protocol"
)

func TestClaudeTurns(t *testing.T) {
	projects := t.TempDir()
	s := session("turns", "/src/turns")
	s.Prompts = []string{"first", "second", "third", "fourth", "fifth"}
	s.Reminder, s.Meta, s.Interrupt = true, true, true
	s.AITitle = "Five turns"
	s.PadTo = 3 << 20 // large replies after the first turn
	path := create(t, projects, s)
	ctx := context.Background()

	all, err := ClaudeTurns(ctx, path, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, turn := range all.Turns {
		texts = append(texts, turn.Message.Text)
	}
	if !slices.Equal(texts, s.Prompts) || all.Before != "" || all.Skipped != 0 {
		t.Fatalf("turns %q, before %q, skipped %d", texts, all.Before, all.Skipped)
	}
	second := all.Turns[1]
	if second.StartedAt == nil || second.Duration == nil || *second.Duration <= 0 || second.State != protocol.TurnStateComplete {
		t.Errorf("second turn %+v", second)
	}
	if second.Usage == nil || second.Usage.Model == nil || *second.Usage.OutputTokens != 300 {
		t.Errorf("usage %+v", second.Usage)
	}
	// thinking, text and tool_use share a message id, one line each; the
	// tool result completes the call; a second reply follows.
	var kinds []string
	for _, p := range second.ResponseParts {
		switch p := p.(type) {
		case *protocol.ReasoningResponsePart:
			kinds = append(kinds, "reasoning")
		case *protocol.MarkdownResponsePart:
			kinds = append(kinds, "markdown:"+p.Content)
		case *protocol.ToolCallResponsePart:
			done, ok := p.ToolCall.(*protocol.ToolCallCompletedState)
			if !ok {
				t.Fatalf("tool call %T", p.ToolCall)
			}
			if !done.Success || done.ToolName != "Bash" || done.ToolInput == nil || len(done.Content) != 1 {
				t.Errorf("tool call %+v", done)
			}
			kinds = append(kinds, "tool:"+done.ToolName)
		}
	}
	want := []string{"reasoning", "markdown:I'll look into it.", "tool:Bash", "markdown:Done with step 2."}
	if !slices.Equal(kinds, want) {
		t.Errorf("parts %q, want %q", kinds, want)
	}
	if last := all.Turns[4]; last.State != protocol.TurnStateCancelled {
		t.Errorf("interrupted turn is %s", last.State)
	}
	if len(all.Turns[0].ResponseParts) < 5 {
		t.Errorf("first turn has %d parts; the padding replies are in it", len(all.Turns[0].ResponseParts))
	}
	// The turns encode as the protocol's JSON.
	if _, err := json.Marshal(&all.Turns[1]); err != nil {
		t.Errorf("encode: %v", err)
	}

	// Pages of two from the end.
	var pages [][]string
	before := ""
	for range 5 {
		page, err := ClaudeTurns(ctx, path, 2, before)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, turn := range page.Turns {
			got = append(got, turn.Message.Text)
		}
		pages = append(pages, got)
		if before = page.Before; before == "" {
			break
		}
	}
	if fmt.Sprint(pages) != "[[fourth fifth] [second third] [first]]" {
		t.Errorf("pages %v", pages)
	}
	if _, err := ClaudeTurns(ctx, path, 2, "no-such-turn"); !errors.Is(err, ErrUnknownCursor) {
		t.Errorf("unknown cursor: %v", err)
	}
}

func TestClaudeTurnsOddLines(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/odd.jsonl"
	writeFile(t, path, `{"type":"assistant","message":{"id":"m0","content":[{"type":"text","text":"orphan"}]}}`+"\n"+
		"garbage\n"+
		userLine("odd", "/x", "main", "hi", base)+
		`{"type":"assistant","isSidechain":true,"message":{"id":"m1","content":[{"type":"text","text":"subagent"}]}}`+"\n"+
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}`+"\n"+
		`{"type":"assistant","message":{"id":"m3","content":"plain string reply"}}`+"\n"+
		`{"type":"assistant","message":{"id":"m4","content":[{"type":"text","text":"`+corpus.Filler(200<<10)+`"}]}}`+"\n"+
		`{"type":"assistant","message":{"id":"m5","content":[{"type":"text","text":"cut`)
	page, err := ClaudeTurns(context.Background(), path, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Turns) != 1 || page.Skipped != 2 {
		t.Fatalf("%d turns, %d skipped", len(page.Turns), page.Skipped)
	}
	parts := page.Turns[0].ResponseParts
	if len(parts) != 3 {
		t.Fatalf("%d parts", len(parts))
	}
	if c, ok := parts[0].(*protocol.ToolCallResponsePart).ToolCall.(*protocol.ToolCallCancelledState); !ok || c.Reason != protocol.ToolCallCancellationReasonSkipped {
		t.Errorf("unanswered tool call %T", parts[0].(*protocol.ToolCallResponsePart).ToolCall)
	}
	if md := parts[1].(*protocol.MarkdownResponsePart); md.Content != "plain string reply" {
		t.Errorf("part %q", md.Content)
	}
}
