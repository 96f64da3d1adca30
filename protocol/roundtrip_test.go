package protocol_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

// decoders maps a vector's type name to a function that decodes it into
// the Go type ahpd uses for it.
var decoders = map[string]func([]byte) (any, error){
	"ActionEnvelope":           decodeAs[protocol.ActionEnvelope],
	"AutomationRunLifecycle":   union(protocol.UnmarshalAutomationRunLifecycle),
	"BackgroundWork":           union(protocol.UnmarshalBackgroundWork),
	"ChatMoveDestination":      union(protocol.UnmarshalChatMoveDestination),
	"ResponsePart":             union(protocol.UnmarshalResponsePart),
	"TerminalLifecycleState":   union(protocol.UnmarshalTerminalLifecycleState),
	"ChangesetOperationTarget": union(protocol.UnmarshalChangesetOperationTarget),
	"ChatInputQuestion":        union(protocol.UnmarshalChatInputQuestion),
	"ChatSource":               union(protocol.UnmarshalChatSource),
	"Customization":            union(protocol.UnmarshalCustomization),
	"Implementation":           decodeAs[protocol.Implementation],
	"InitializeResult":         decodeAs[protocol.InitializeResult],
	"JsonRpcMessage":           decodeAs[protocol.RPCMessage],
	"PartialSessionSummary":    decodeAs[protocol.PartialSessionSummary],
	"SessionAddedParams":       decodeAs[protocol.SessionAddedParams],
	"SessionStatus":            decodeAs[protocol.SessionStatus],
	"SessionSummary":           decodeAs[protocol.SessionSummary],
	"StateAction":              union(protocol.UnmarshalAction),
	"StringOrMarkdown":         decodeAs[protocol.StringOrMarkdown],
}

func decodeAs[T any](b []byte) (any, error) {
	v := new(T)
	err := json.Unmarshal(b, v)
	return v, err
}

func union[T any](fn func([]byte) (T, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) { return fn(b) }
}

type roundTrip struct {
	Name              string            `json:"name"`
	Group             string            `json:"group"`
	Type              string            `json:"type"`
	Input             json.RawMessage   `json:"input"`
	AcceptableOutputs []json.RawMessage `json:"acceptableOutputs"`
	PreservedOutput   json.RawMessage   `json:"preservedOutput"`
}

// TestRoundTripVectors decodes each wire vector into ahpd's Go type and
// checks the re-encoding against the canonical output. Group B vectors
// carry members the type does not define; ahpd keeps such members (a newer
// peer's fields pass through it), so they are checked against the
// preserved form.
func TestRoundTripVectors(t *testing.T) {
	files := vectorFiles(t, "round-trips")
	for _, path := range files {
		var rt roundTrip
		readJSON(t, path, &rt)
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			dec, ok := decoders[rt.Type]
			if !ok {
				t.Fatalf("no Go type for %q", rt.Type)
			}
			if len(rt.AcceptableOutputs) != 1 {
				t.Fatalf("vector has %d acceptable outputs, want exactly 1", len(rt.AcceptableOutputs))
			}
			want := rt.AcceptableOutputs[0]
			if rt.Group == "B" {
				want = rt.PreservedOutput
			}
			v, err := dec(rt.Input)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !jsonEqual(t, got, want) {
				t.Errorf("re-encoded\n got: %s\nwant: %s", got, want)
			}
			schemas, err := protocoltest.Default()
			if err != nil {
				t.Fatal(err)
			}
			if !schemas.Has(rt.Type) {
				return // JsonRpcMessage, PartialSessionSummary: named by the vectors only
			}
			err = schemas.Validate(rt.Type, got)
			switch {
			case unknownVariant[rt.Name] && err == nil:
				t.Errorf("a variant the schema does not define validated as %s", rt.Type)
			case !unknownVariant[rt.Name] && err != nil:
				t.Error(err)
			}
		})
	}
}

// unknownVariant names the vectors holding a union variant the schema does
// not define: ahpd keeps them, and the schema rightly refuses them.
var unknownVariant = map[string]bool{
	"state-action-unknown-variant-preserved": true,
	"customization-unknown-type-preserved":   true,
}

// jsonEqual compares JSON texts as values: member order does not matter,
// null and absent differ.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(parseJSON(t, a), parseJSON(t, b))
}

// parseJSON parses JSON text for comparison. Numbers compare by value
// (0.0 equals 0), parsed as float64, exact for every integer the protocol
// carries (up to 2^53).
func parseJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return v
}

// projectVectors is where ahpd keeps the vectors of 1.0: upstream vectors
// whose shapes changed, under their upstream names, and new ones.
const projectVectors = "testdata/ahp-1.0"

// vectorFiles returns the vectors of sub: every upstream 0.8 vector, or the
// project's 1.0 version of it when there is one, then the project's new
// vectors.
func vectorFiles(t *testing.T, sub string) []string {
	t.Helper()
	upstream := upstreamVectors(t, sub)
	ours, err := filepath.Glob(filepath.Join(projectVectors, sub, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{}
	for _, p := range ours {
		mine[filepath.Base(p)] = p
	}
	files := make([]string, 0, len(upstream)+len(ours))
	for _, p := range upstream {
		if own, ok := mine[filepath.Base(p)]; ok {
			p = own
			delete(mine, filepath.Base(p))
		}
		files = append(files, p)
	}
	for _, p := range ours {
		if _, left := mine[filepath.Base(p)]; left {
			files = append(files, p)
		}
	}
	return files
}

// upstreamVectors returns the upstream 0.8 vectors of sub.
func upstreamVectors(t *testing.T, sub string) []string {
	t.Helper()
	dir, err := protocoltest.TestCasesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in %s: the conformance vectors are required (set $AHP_TEST_CASES)", filepath.Join(dir, sub))
	}
	return files

}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
