package acp_test

import (
	"slices"
	"strings"
	"testing"
)

// TestExampleAgent runs a turn of the SDK's example agent: streamed text,
// a read tool call, then an edit it asks permission for. Each turn takes
// it about five seconds.
func TestExampleAgent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		approve bool
		want    string
	}{
		{"approved", true, "Perfect! I've successfully updated the configuration."},
		{"denied", false, "I understand you prefer not to make that change."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			a := f.start(t, f.backend(exampleAgent), "conv", false)
			turn := newTurn()
			turn.confirms <- tt.approve
			if err := prompt(t, a, "Please improve the configuration.", turn); err != nil {
				t.Fatal(err)
			}
			text := turn.text()
			if !strings.Contains(text, "I'll help you with that.") || !strings.Contains(text, tt.want) {
				t.Errorf("text = %q", text)
			}
			if got := turn.about("call_1"); !slices.Equal(got, []string{"toolStart", "toolDone"}) {
				t.Errorf("call_1 events = %v", got)
			}
			if r := turn.of("toolDone")[0].result; !r.Success || len(r.Content) != 1 {
				t.Errorf("call_1 result = %+v", r)
			}
			confirms := turn.of("confirm")
			if len(confirms) != 1 || confirms[0].call.ID != "call_2" || confirms[0].call.Name != "edit" ||
				confirms[0].call.DisplayName != "Modifying critical configuration file" {
				t.Errorf("confirms = %+v", confirms)
			}
			wantDone := tt.approve
			if got := slices.Contains(turn.about("call_2"), "toolDone"); got != wantDone {
				t.Errorf("call_2 events = %v", turn.about("call_2"))
			}
		})
	}
}
