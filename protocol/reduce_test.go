package protocol_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

type reducerVector struct {
	Description string            `json:"description"`
	Reducer     string            `json:"reducer"`
	Initial     json.RawMessage   `json:"initial"`
	Actions     []json.RawMessage `json:"actions"`
	Expected    json.RawMessage   `json:"expected"`
}

// stateDefs maps a vector's reducer to the schema definition of its state.
var stateDefs = map[string]string{
	"root":          "RootState",
	"session":       "SessionState",
	"chat":          "ChatState",
	"terminal":      "TerminalState",
	"changeset":     "ChangesetState",
	"annotations":   "AnnotationsState",
	"resourceWatch": "ResourceWatchState",
	"automation":    "AutomationState",
	"automationRun": "AutomationRunState",
	"canvas":        "CanvasState",
}

// holdsUnknownVariant names the vectors whose state holds a union variant
// the schema does not define (a response part from a newer peer): ahpd
// keeps it, and the schema rightly refuses it.
var holdsUnknownVariant = map[string]bool{
	"103-delta-skips-parts-without-id.json": true,
}

func newState(reducer string) protocol.ChannelState {
	switch reducer {
	case "root":
		return new(protocol.RootState)
	case "session":
		return new(protocol.SessionState)
	case "chat":
		return new(protocol.ChatState)
	case "terminal":
		return new(protocol.TerminalState)
	case "changeset":
		return new(protocol.ChangesetState)
	case "annotations":
		return new(protocol.AnnotationsState)
	case "resourceWatch":
		return new(protocol.ResourceWatchState)
	case "automation":
		return new(protocol.AutomationState)
	case "automationRun":
		return new(protocol.AutomationRunState)
	case "canvas":
		return new(protocol.CanvasState)
	}
	return nil
}

// TestReducerVectors runs every reducer vector through ahpd's reducers.
// The reference writes absent members as null in places, so members that
// are null compare as absent; everything else must match exactly.
func TestReducerVectors(t *testing.T) {
	if n := len(upstreamVectors(t, "reducers")); n != 249 {
		t.Errorf("found %d upstream reducer vectors, want 249", n)
	}
	files := vectorFiles(t, "reducers")
	schemas, err := protocoltest.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		var v reducerVector
		readJSON(t, path, &v)
		name := v.Reducer + "/" + strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			state := newState(v.Reducer)
			if state == nil {
				t.Fatalf("unknown reducer %q", v.Reducer)
			}
			if err := json.Unmarshal(v.Initial, state); err != nil {
				t.Fatalf("decode initial state: %v", err)
			}
			if got := encode(t, state); !sameState(t, got, v.Initial) {
				t.Fatalf("initial state does not survive a round trip:\n got: %s\nwant: %s", got, v.Initial)
			}
			for i, raw := range v.Actions {
				a, err := protocol.UnmarshalAction(raw)
				if err != nil {
					t.Fatalf("decode action %d: %v", i, err)
				}
				before := encode(t, state)
				next := protocol.Apply(state, a)
				if !sameState(t, encode(t, state), before) {
					t.Fatalf("action %d (%s) modified the state it was given", i, a.Type())
				}
				state = next
			}
			got := encode(t, state)
			if !sameState(t, got, v.Expected) {
				t.Fatalf("%s\n got: %s\nwant: %s", v.Description, got, v.Expected)
			}
			err := schemas.Validate(stateDefs[v.Reducer], got)
			switch {
			case holdsUnknownVariant[filepath.Base(path)] && err == nil:
				t.Error("a state holding a variant the schema does not define validated")
			case !holdsUnknownVariant[filepath.Base(path)] && err != nil:
				t.Error(err)
			}
		})
	}
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return b
}

func sameState(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(stripNulls(parseJSON(t, a)), stripNulls(parseJSON(t, b)))
}

func stripNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = stripNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stripNulls(e)
		}
		return out
	}
	return v
}
