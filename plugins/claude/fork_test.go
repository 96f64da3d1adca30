package claude_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/claude/claudetest"
	"github.com/ahpd/ahpd/plugins/pluginstest"
)

// TestForkAtTurn forks a two-turn conversation at its first turn: the
// model call the fork's next turn makes carries turn 1 and not turn 2,
// and the source keeps both.
func TestForkAtTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if fork, side := plugins.Forks(f.backend); !fork || !side {
		t.Errorf("Forks = %v, %v; want both", fork, side)
	}
	id, t1, t2 := newID(), newID(), newID()
	a := f.start(t, f.backend, id, false, nil)
	f.mock.Enqueue(claudetest.Text("The code word is pelican."))
	if err := prompt(t, a, pluginstest.NewTurn(t1), "remember a code word"); err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	f.mock.Enqueue(claudetest.Text("The code word is heron now."))
	if err := prompt(t, a, pluginstest.NewTurn(t2), "change the code word"); err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	// The CLI writes its transcript every 100 ms: the fork copies what
	// it has.
	waitForFile(t, claude.TranscriptPath(a), "heron now")

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	into := newID()
	got, err := f.backend.Fork(ctx, plugins.ForkOptions{From: f.conv(id), TurnID: t1, Into: f.conv(into)})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if got != into {
		t.Errorf("Fork returned %q, want the id asked for, %q", got, into)
	}
	turns, err := f.backend.Turns(ctx, f.conv(into))
	if err != nil || len(turns) != 1 || turns[0].ID != t1 {
		t.Fatalf("the fork's turns: %d (%v), want turn 1 alone", len(turns), err)
	}

	forked := f.start(t, f.backend, into, true, nil)
	f.mock.Enqueue(claudetest.Text("It was pelican."))
	if err := prompt(t, forked, pluginstest.NewTurn(newID()), "what was the code word?"); err != nil {
		t.Fatalf("the fork's turn: %v", err)
	}
	texts := f.lastRequest(t).Texts()
	want := []string{"user: remember a code word", "assistant: The code word is pelican.", "user: what was the code word?"}
	if !slices.Equal(texts, want) {
		t.Errorf("the fork's model call carried %q, want %q", texts, want)
	}
	if turns, err := f.backend.Turns(ctx, f.conv(id)); err != nil || len(turns) != 2 {
		t.Errorf("the source has %d turns after the fork's (%v), want 2", len(turns), err)
	}
	if _, err := f.backend.Fork(ctx, plugins.ForkOptions{From: f.conv(id), TurnID: newID(), Into: f.conv(newID())}); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("a fork at a turn the conversation does not have: %v, want ErrNotFound", err)
	}
}
