package claude_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// TestModelSwitch: each turn runs on the model its message picks, in the
// one resident CLI, which is switched (set_model) rather than restarted;
// the usage names the model the API answered with, and the switches
// leave no turns of their own in the transcript.
func TestModelSwitch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(t, f.backend, newID(), false, nil)
	pid := claude.PID(a)

	steps := []struct {
		turn, picked string
		want         string // the prefix of the model the API is asked for
	}{
		{"turn-1", "haiku", "claude-haiku"},
		{"turn-2", "sonnet", "claude-sonnet"},
		{"turn-3", "", ""}, // the CLI's default again
	}
	var asked []string
	for i, s := range steps {
		msg := userMessage("question " + s.turn)
		if s.picked != "" {
			msg.Model = &protocol.ModelSelection{ID: s.picked}
		}
		turn := pluginstest.NewTurn(s.turn)
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		start := time.Now()
		err := a.Prompt(ctx, msg, turn)
		cancel()
		if err != nil {
			t.Fatalf("%s picking %q: %v", s.turn, s.picked, err)
		}
		t.Logf("%s picking %q took %v", s.turn, s.picked, time.Since(start))
		reqs := f.mock.Requests()
		if len(reqs) != i+1 {
			t.Fatalf("after %s the mock has %d model calls, want %d", s.turn, len(reqs), i+1)
		}
		model := reqs[i].Model
		asked = append(asked, model)
		if !strings.HasPrefix(model, s.want) {
			t.Errorf("%s picking %q asked the API for %q, want %s…", s.turn, s.picked, model, s.want)
		}
		if got := reqs[i].UserText(); got != "question "+s.turn {
			t.Errorf("%s asked the model %q", s.turn, got)
		}
		usage := turn.Of("usage")
		if len(usage) != 1 || usage[0].Usage.Model == nil || *usage[0].Usage.Model != model {
			t.Errorf("%s's usage = %+v, want it to name %q", s.turn, usage, model)
		}
		if got := claude.PID(a); got != pid {
			t.Errorf("%s ran in process %d, the agent started %d: the CLI was restarted", s.turn, got, pid)
		}
	}
	if def := asked[2]; strings.HasPrefix(def, "claude-haiku") || strings.HasPrefix(def, "claude-sonnet") {
		t.Errorf("a turn picking no model ran on %q, not the CLI's default", def)
	}

	// The CLI writes its transcript at the latest when it exits.
	a.Close()
	turns, err := f.backend.Turns(context.Background(), f.conv(a.ID()))
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	var got []string
	for _, turn := range turns {
		model := ""
		if turn.Usage != nil && turn.Usage.Model != nil {
			model = *turn.Usage.Model
		}
		got = append(got, turn.ID+" "+turn.Message.Text+" on "+model)
	}
	want := []string{
		"turn-1 question turn-1 on " + asked[0],
		"turn-2 question turn-2 on " + asked[1],
		"turn-3 question turn-3 on " + asked[2],
	}
	if !slices.Equal(got, want) {
		t.Errorf("the transcript reads back as %q, want %q", got, want)
	}
}
