package acp_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
)

// TestFork forks a conversation at its last turn with session/fork: the
// fork goes on with the turns before, the source is unchanged, and the
// backend advertises a fork (and no side chat) once an agent offered it.
func TestFork(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"TESTAGENT_CAPS": "fork"})
	a := f.start(t, f.b, "x", false)
	mustPrompt(t, a, "say one")
	mustPrompt(t, a, "say two")
	if fork, side := plugins.Forks(f.b); !fork || side {
		t.Errorf("Forks = %v, %v; want a fork and no side chat", fork, side)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	id, err := f.b.Fork(ctx, plugins.ForkOptions{From: f.conv(a.ID()), TurnID: "t2", Last: true, Into: f.conv("ignored")})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if id == "" || id == a.ID() {
		t.Fatalf("Fork returned %q (the source is %q)", id, a.ID())
	}
	forked := f.start(t, f.backend(testAgent), id, true)
	if forked.ID() != id {
		t.Errorf("the fork resumed as %q, want %q", forked.ID(), id)
	}
	if got := mustPrompt(t, forked, "history").Response(); got != "history: 2" {
		t.Errorf("the fork: %q, want the two turns before", got)
	}
	if got := mustPrompt(t, a, "history").Response(); got != "history: 2" {
		t.Errorf("the source after the fork's turn: %q, want its own two turns", got)
	}
}

// TestForkRefused checks that a fork ACP cannot make is refused saying
// why: an agent without session/fork, and a turn before the last.
func TestForkRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()

	f := newFixture(t, nil) // loads sessions, offers no fork
	a := f.start(t, f.b, "x", false)
	mustPrompt(t, a, "say one")
	if fork, side := plugins.Forks(f.b); fork || side {
		t.Errorf("an agent without session/fork: Forks = %v, %v", fork, side)
	}
	_, err := f.b.Fork(ctx, plugins.ForkOptions{From: f.conv(a.ID()), TurnID: "t1", Last: true, Into: f.conv("y")})
	if !errors.Is(err, plugins.ErrCannotFork) || !strings.Contains(err.Error(), "does not offer session/fork") {
		t.Errorf("Fork of an agent without session/fork: %v", err)
	}

	f = newFixture(t, map[string]string{"TESTAGENT_CAPS": "fork"})
	a = f.start(t, f.b, "x", false)
	mustPrompt(t, a, "say one")
	mustPrompt(t, a, "say two")
	_, err = f.b.Fork(ctx, plugins.ForkOptions{From: f.conv(a.ID()), TurnID: "t1", Into: f.conv("y")})
	if !errors.Is(err, plugins.ErrCannotFork) || !strings.Contains(err.Error(), "last finished turn") {
		t.Errorf("Fork before the last turn: %v", err)
	}
}
