package protocol_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/protocol/protocoltest"
)

// TestDecodeErrorsNameTheMember checks that a value that does not fit says
// where, so the host can answer -32602 with a message a person can act on.
func TestDecodeErrorsNameTheMember(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path string
		msg  string
	}{
		{`{"type":"chat/delta","turnId":1,"partId":"p","content":"c"}`, "turnId", "expected string, found number"},
		{`{"type":"chat/delta","turnId":"t","content":"c"}`, "partId", "missing required member"},
		{`{"type":"chat/turnStarted","turnId":"t","startedAt":"s","message":{"text":"x","origin":{"kind":3}}}`, "message.origin.kind", "expected string"},
		{`{"type":"chat/responsePart","turnId":"t","part":{"kind":"markdown","id":"p"}}`, "part.content", "missing required member"},
		{`{"type":"chat/toolCallContentChanged","turnId":"t","toolCallId":"c","content":[{"type":"text","text":"a"},{"type":"text"}]}`, "content[1].text", "missing required member"},
		{`{"type":"session/titleChanged","title":"a","title":"b"}`, "", "duplicate"},
		{`{"type":"session/titleChanged","title":"a"} x`, "", "after"},
		{`{"type":"session/isReadChanged","isRead":"yes"}`, "isRead", "expected boolean"},
		{`{"type":"root/activeSessionsChanged","activeSessions":1.5}`, "activeSessions", "expected an integer"},
		{`[1]`, "", "expected object"},
	} {
		_, err := protocol.UnmarshalAction([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: decoded without error", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %q does not say %q", tc.in, err, tc.msg)
		}
		var de *protocol.DecodeError
		if tc.path != "" && (!errors.As(err, &de) || de.Path != tc.path) {
			t.Errorf("%s: error %q does not name %q", tc.in, err, tc.path)
		}
	}
}

// TestUnknownMembersPassThrough checks that members this version does not
// define survive decoding, a reducer, and encoding, at any depth.
func TestUnknownMembersPassThrough(t *testing.T) {
	raw := `{"type":"chat/turnStarted","turnId":"t1","startedAt":"2026-01-01T00:00:00.000Z","future":{"a":[1,2]},
		"message":{"text":"hi","origin":{"kind":"user","via":"cli"},"tone":"calm"}}`
	a, err := protocol.UnmarshalAction([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, a); !jsonEqual(t, got, []byte(raw)) {
		t.Errorf("re-encoded action lost members:\n got: %s\nwant: %s", got, raw)
	}
	s := protocol.ReduceChat(&protocol.ChatState{Resource: "ahp-chat://default/x", Turns: []protocol.Turn{}}, a)
	msg := encode(t, s.ActiveTurn.Message)
	if want := `{"text":"hi","origin":{"kind":"user","via":"cli"},"tone":"calm"}`; !jsonEqual(t, msg, []byte(want)) {
		t.Errorf("message in state = %s, want %s", msg, want)
	}
}

// TestEncodedValuesValidate checks values built in Go, not decoded from
// vectors, against the schema: what the host constructs must be valid.
func TestEncodedValuesValidate(t *testing.T) {
	for _, tc := range []struct {
		def string
		v   any
	}{
		{"ActionEnvelope", protocol.ActionEnvelope{
			Channel:   "ahp-chat://default/YWhwLXNlc3Npb246L3M",
			Action:    &protocol.ChatDeltaAction{TurnID: "t", PartID: "p", Content: "héllo \"quoted\" \u2028 <tag> \x01"},
			ServerSeq: 1 << 40,
			Origin:    &protocol.ActionOrigin{ClientID: "c", ClientSeq: 3},
		}},
		{"StateAction", &protocol.ChatToolCallReadyAction{
			TurnID: "t", ToolCallID: "c", InvocationMessage: protocol.Markdown("Write `a.txt`"),
			ToolInput: protocol.InlineInput(`{"path":"a.txt"}`), Confirmed: new(protocol.ToolCallConfirmationReasonNotNeeded),
		}},
		{"StateAction", &protocol.ChatToolCallConfirmedAction{
			TurnID: "t", ToolCallID: "c", Approved: false, Reason: new(protocol.ToolCallCancellationReasonDenied),
		}},
		{"StateAction", &protocol.ChatTurnCompleteAction{TurnID: "t", Duration: 12}},
		{"StateAction", &protocol.SessionWorkingDirectoryReplacedAction{Directory: "file:///a", Replacement: "file:///a.worktrees/s"}},
		{"SessionSummary", protocol.SessionSummary{
			Resource: "script:/s1", Provider: "script", Title: "t",
			Status:    protocol.StatusInProgress | protocol.StatusIsRead | protocol.StatusIsArchived,
			CreatedAt: protocol.FormatTime(time.Unix(0, 0)), ModifiedAt: protocol.FormatTime(time.Now()),
		}},
		{"ReconnectSnapshotResult", protocol.ReconnectSnapshotResult{Snapshots: []protocol.Snapshot{{
			Resource: "ahp-root://", State: &protocol.RootState{Agents: nil}, FromSeq: 0,
		}}}},
	} {
		protocoltest.Validate(t, tc.def, tc.v)
	}
}

// FuzzUnmarshalAction checks that no input panics the decoder and that a
// decoded action re-encodes to JSON that decodes to the same encoding.
func FuzzUnmarshalAction(f *testing.F) {
	for _, seed := range []string{
		`{"type":"chat/delta","turnId":"t","partId":"p","content":"c"}`,
		`{"type":"chat/toolCallConfirmed","turnId":"t","toolCallId":"c","approved":true,"confirmed":"user-action"}`,
		`{"type":"session/customizationsChanged","customizations":[{"type":"mcpServer","id":"m","uri":"u","name":"n","enabled":true,"state":{"kind":"ready"}}]}`,
		`{"type":"future/thing","x":[{"y":null}]}`,
		`{"type":"chat/responsePart","turnId":"t","part":{"kind":"toolCall","toolCall":{"status":"running","toolCallId":"c","toolName":"n","displayName":"d","invocationMessage":{"markdown":"m"},"confirmed":"setting"}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := protocol.UnmarshalAction(in)
		if err != nil {
			return
		}
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("encode %s: %v", in, err)
		}
		b, err := protocol.UnmarshalAction(out)
		if err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		again, err := json.Marshal(b)
		if err != nil || string(again) != string(out) {
			t.Fatalf("encoding is not stable:\n%s\n%s", out, again)
		}
	})
}

// TestObjectOrderKept checks that a typed JSON object keeps its members'
// order: a client draws config properties in the order they come.
func TestObjectOrderKept(t *testing.T) {
	in := `{"type":"object","properties":{"isolation":{"type":"string","title":"I"},"branch":{"type":"string","title":"B"},"autoApprove":{"type":"string","title":"A"}}}`
	var s protocol.SessionConfigSchema
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Properties.Keys(), ","); got != "isolation,branch,autoApprove" {
		t.Errorf("keys = %s", got)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("re-encoded\n got: %s\nwant: %s", out, in)
	}
}
