package automations

import (
	"errors"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// TestCheckNamesTheField: Check refuses what Create refuses, and says
// which field is at fault, so a config file can point at its own line.
func TestCheckNamesTheField(t *testing.T) {
	good := func() protocol.AutomationDefinition {
		d := everySecond(protocol.AutomationMisfirePolicyRunOnce, "0 9 * * *")
		d.Triggers = append(d.Triggers, &protocol.AutomationEventTrigger{ID: "e", Type: TriggerSession,
			Events: []protocol.AutomationTriggerEventDefinition{{ID: EventTurnCompleted}}})
		return d
	}
	for _, tc := range []struct {
		name  string
		uri   string
		edit  func(d *protocol.AutomationDefinition)
		field string
		want  string
	}{
		{"bad uri", "nightly", nil, "resource", "not an ahp-automation:/<id> URI"},
		{"no title", "", func(d *protocol.AutomationDefinition) { d.Title = "" }, "title", "title must be"},
		{"no message", "", func(d *protocol.AutomationDefinition) { d.Message.Text = " " }, "message", "the message is empty"},
		{"bad cron", "", func(d *protocol.AutomationDefinition) {
			d.Triggers[0].(*protocol.AutomationScheduleTrigger).Schedule.Expression = "0 25 * * *"
		}, "triggers[0].schedule", "25"},
		{"bad misfire", "", func(d *protocol.AutomationDefinition) {
			p := protocol.AutomationMisfirePolicy("later")
			d.Triggers[0].(*protocol.AutomationScheduleTrigger).MisfirePolicy = &p
		}, "triggers[0].misfirePolicy", "neither"},
		{"bad event", "", func(d *protocol.AutomationDefinition) {
			d.Triggers[1].(*protocol.AutomationEventTrigger).Type = "ahpd.weather"
		}, "triggers[1]", "unknown event trigger type"},
		{"same trigger id", "", func(d *protocol.AutomationDefinition) {
			d.Triggers[1].(*protocol.AutomationEventTrigger).ID = "s"
		}, "triggers[1].id", "two triggers have the id"},
		{"afterRuns zero", "", func(d *protocol.AutomationDefinition) {
			d.DisableConditions = []protocol.AutomationDisableCondition{&protocol.AutomationAfterDateCondition{Date: "2031-01-01T00:00:00Z"}, &protocol.AutomationAfterRunsCondition{}}
		}, "disableConditions[1]", "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := good()
			if tc.edit != nil {
				tc.edit(&d)
			}
			uri := tc.uri
			if uri == "" {
				uri = "ahp-automation:/x"
			}
			err := Check(uri, d)
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Check = %v, want a FieldError wrapping ErrInvalid", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Reason(), tc.want) || strings.HasPrefix(fe.Reason(), ErrInvalid.Error()) {
				t.Fatalf("field %q reason %q, want field %q and a reason saying %q", fe.Field, fe.Reason(), tc.field, tc.want)
			}
		})
	}
	if err := Check("ahp-automation:/x", good()); err != nil {
		t.Fatalf("a good definition: %v", err)
	}
}
