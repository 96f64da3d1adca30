package acp_test

import (
	"context"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

func TestConfigOptionsAndModels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"TESTAGENT_OPTIONS": "1"})
	a := f.start(t, f.b, "conv", false)

	// Learned from the session.
	var models []string
	for _, m := range f.b.Info().Models {
		models = append(models, m.ID+"="+m.Name)
	}
	if !slices.Equal(models, []string{"m1=Model One", "m2=Model Two"}) {
		t.Errorf("models = %v", models)
	}
	props := f.b.ConfigProperties()
	if len(props) != 2 || props[0].Key != "style" || props[1].Key != "verbose" {
		t.Fatalf("properties = %+v", props)
	}
	style := props[0].Schema
	if style.Type != "string" || string(style.Default) != `"plain"` || len(style.Enum) != 2 ||
		!slices.Equal(style.EnumLabels, []string{"Plain", "Fancy"}) || !slices.Equal(style.EnumDescriptions, []string{"", "With flourishes"}) {
		t.Errorf("style = %+v", style)
	}
	if v := props[1].Schema; v.Type != "boolean" || string(v.Default) != "false" {
		t.Errorf("verbose = %+v", v)
	}

	// Changed while the agent runs.
	a.(plugins.Reconfigurer).SetConfig(protocol.Object{
		"style":   jsontext.Value(`"fancy"`),
		"verbose": jsontext.Value(`true`),
		"other":   jsontext.Value(`1`),
	})
	// They are sent to the agent in the background; it says when each
	// holds.
	f.log.waitFor(t, "testagent: config style=fancy")
	f.log.waitFor(t, "testagent: config verbose=true")
	if got, want := mustPrompt(t, a, "config").Response(), "style=fancy verbose=true model=m1"; got != want {
		t.Fatalf("config = %q, want %q", got, want)
	}

	// A message that asks for a model switches to it, and the turn's
	// usage names it.
	turn := pluginstest.NewTurn("")
	msg := userMessage("config\nusage")
	msg.Model = &protocol.ModelSelection{ID: "m2"}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if err := a.Prompt(ctx, msg, turn); err != nil {
		t.Fatal(err)
	}
	if got := turn.Response(); got != "style=fancy verbose=true model=m2" {
		t.Errorf("after choosing m2: %q", got)
	}
	if u := turn.Of("usage"); len(u) != 1 || u[0].Usage.Model == nil || *u[0].Usage.Model != "m2" {
		t.Errorf("usage after choosing m2 = %+v", u)
	}

	// Values given at Start apply from the start.
	a2, err := f.b.Start(ctx, plugins.StartOptions{
		Conversation: f.conv("conv2"),
		Config:       protocol.Object{"verbose": jsontext.Value(`true`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if got := mustPrompt(t, a2, "config").Response(); got != "style=plain verbose=true model=m1" {
		t.Errorf("started with verbose: %q", got)
	}
}
