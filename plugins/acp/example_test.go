package acp_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins/pluginstest"
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
			turn := pluginstest.NewTurn("")
			turn.Confirms <- tt.approve
			if err := prompt(t, a, "Please improve the configuration.", turn); err != nil {
				t.Fatal(err)
			}
			text := turn.Response()
			if !strings.Contains(text, "I'll help you with that.") || !strings.Contains(text, tt.want) {
				t.Errorf("text = %q", text)
			}
			if got := turn.About("call_1"); !slices.Equal(got, []string{"toolStart", "toolDone"}) {
				t.Errorf("call_1 events = %v", got)
			}
			if r := turn.Of("toolDone")[0].Result; !r.Success || len(r.Content) != 1 {
				t.Errorf("call_1 result = %+v", r)
			}
			confirms := turn.Of("confirm")
			if len(confirms) != 1 || confirms[0].Call.ID != "call_2" || confirms[0].Call.Name != "edit" ||
				confirms[0].Call.DisplayName != "Modifying critical configuration file" {
				t.Errorf("confirms = %+v", confirms)
			}
			wantDone := tt.approve
			if got := slices.Contains(turn.About("call_2"), "toolDone"); got != wantDone {
				t.Errorf("call_2 events = %v", turn.About("call_2"))
			}
		})
	}
}
