package protocol_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// mirrorVector is a vector of testdata/ahp-1.0/mirror: a session and one
// of its chats with the actions MirrorChat must give ("chat"), or a
// session's chats and the status and activity SessionActivity must give
// ("activity").
type mirrorVector struct {
	Description string `json:"description"`
	Kind        string `json:"kind"`

	Session   json.RawMessage   `json:"session"`
	Chat      json.RawMessage   `json:"chat"`
	IsDefault bool              `json:"isDefault"`
	Actions   []json.RawMessage `json:"actions"`

	Status           protocol.SessionStatus `json:"status"`
	Activity         *string                `json:"activity"`
	DefaultChat      string                 `json:"defaultChat"`
	Chats            []json.RawMessage      `json:"chats"`
	ExpectedStatus   protocol.SessionStatus `json:"expectedStatus"`
	ExpectedActivity *string                `json:"expectedActivity"`
}

func TestMirrorVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(projectVectors, "mirror", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mirror vectors: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var v mirrorVector
			readJSON(t, path, &v)
			switch v.Kind {
			case "chat":
				checkMirrorChat(t, &v)
			case "activity":
				checkActivity(t, &v)
			default:
				t.Fatalf("unknown kind %q", v.Kind)
			}
		})
	}
}

// checkMirrorChat compares MirrorChat's actions with the vector's, then
// applies them: the session they make mirrors the chat, so a second call
// asks for nothing.
func checkMirrorChat(t *testing.T, v *mirrorVector) {
	var s protocol.SessionState
	var c protocol.ChatState
	if err := json.Unmarshal(v.Session, &s); err != nil {
		t.Fatalf("session: %v", err)
	}
	if err := json.Unmarshal(v.Chat, &c); err != nil {
		t.Fatalf("chat: %v", err)
	}
	got := protocol.MirrorChat(&s, &c, v.IsDefault)
	if len(got) != len(v.Actions) {
		t.Fatalf("%s: %d actions, want %d: %s", v.Description, len(got), len(v.Actions), encodeAll(t, got))
	}
	for i, a := range got {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, b, v.Actions[i]) {
			t.Errorf("%s: action %d is %s, want %s", v.Description, i, b, v.Actions[i])
		}
	}
	next := &s
	for _, a := range got {
		next = protocol.ReduceSession(next, a)
	}
	if again := protocol.MirrorChat(next, &c, v.IsDefault); len(again) != 0 {
		t.Errorf("%s: after its actions the session still asks for %s", v.Description, encodeAll(t, again))
	}
}

func checkActivity(t *testing.T, v *mirrorVector) {
	chats := make([]*protocol.ChatState, len(v.Chats))
	for i, raw := range v.Chats {
		chats[i] = new(protocol.ChatState)
		if err := json.Unmarshal(raw, chats[i]); err != nil {
			t.Fatalf("chat %d: %v", i, err)
		}
	}
	status, text := protocol.SessionActivity(v.Status, v.Activity, v.DefaultChat, chats)
	if status != v.ExpectedStatus {
		t.Errorf("%s: status %d, want %d", v.Description, status, v.ExpectedStatus)
	}
	if (text == nil) != (v.ExpectedActivity == nil) || (text != nil && *text != *v.ExpectedActivity) {
		t.Errorf("%s: activity %v, want %v", v.Description, deref(text), deref(v.ExpectedActivity))
	}
}

func encodeAll(t *testing.T, as []protocol.Action) string {
	b, err := json.Marshal(as)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}
