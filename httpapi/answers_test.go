package httpapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// question is the session's one open question, as GET shows it.
func (e *env) question(t *testing.T, id, kind string) map[string]any {
	t.Helper()
	got := e.must(200, "mo", "GET", "/v1/sessions/"+id, nil)
	qs, _ := got["questions"].([]any)
	if len(qs) != 1 || got["status"] != "waiting" {
		t.Fatalf("session %s: status %v, questions %v", id, got["status"], got["questions"])
	}
	q := qs[0].(map[string]any)
	if q["kind"] != kind {
		t.Fatalf("the open question is %v, want a %s", q, kind)
	}
	return q
}

// errCode is an error answer's code and field.
func errCode(out map[string]any) (code, field string) {
	e, _ := out["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

// TestAnswerAndApprove answers a script session's question and approves
// its write over the API, as a member; a guest may do neither; what is
// not waiting is 404, what a turn that ended asked is 409; bad answers
// are 400 naming the member.
func TestAnswerAndApprove(t *testing.T) {
	e := newEnv(t)
	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "s1", "folder": e.work, "provider": "script"})
	// Followed from before the turn starts, the stream has all of it.
	events := e.events("mo", "/v1/sessions/s1/events")
	if ready := events.next(t); ready.event != "ready" {
		t.Fatalf("first event %v", ready)
	}
	e.must(202, "mo", "POST", "/v1/sessions/s1/turns", map[string]any{"input": "ask Which file?\nwrite notes.txt hi"})
	events.until(t, "chat/inputRequested")
	q := e.question(t, "s1", "input")
	qs := q["questions"].([]any)
	if q["text"] != "Which file?" || len(qs) != 1 || qs[0].(map[string]any)["kind"] != "text" || qs[0].(map[string]any)["required"] != true {
		t.Fatalf("the question as shown: %v", q)
	}
	ask := "/v1/sessions/s1/questions/" + q["id"].(string)

	for _, tt := range []struct {
		who, path string
		body      any
		status    int
		code      string
		field     string
	}{
		{"gus", ask, map[string]any{"answer": "notes.txt"}, 403, "forbidden", ""},
		{"mo", "/v1/sessions/s1/questions/nope", map[string]any{"answer": "x"}, 404, "not_found", ""},
		{"mo", "/v1/sessions/nobody/questions/x", map[string]any{"answer": "x"}, 404, "not_found", ""},
		{"mo", "/v1/sessions/s1/tool-calls/" + q["id"].(string), map[string]any{"decision": "approve"}, 404, "not_found", ""},
		{"mo", ask, map[string]any{}, 400, "invalid_request", "answer"},
		{"mo", ask, map[string]any{"answer": map[string]any{"x": 1}}, 400, "invalid_request", "answer"},
		{"mo", ask, map[string]any{"answers": map[string]any{"colour": "red"}}, 400, "invalid_request", "answers.colour"},
		{"mo", ask, map[string]any{"answer": "x", "decline": true}, 400, "invalid_request", "decline"},
		{"mo", ask, map[string]any{"answer": ""}, 400, "invalid_request", "answers.answer"},
		{"mo", ask, map[string]any{"colour": "red"}, 400, "invalid_request", "colour"},
		{"mo", ask, map[string]any{"answers": map[string]any{strings.Repeat("x", 5000): "red"}}, 400, "invalid_request", "answers"},
	} {
		status, out := e.call(tt.who, "POST", tt.path, tt.body)
		if code, field := errCode(out); status != tt.status || code != tt.code || field != tt.field {
			t.Errorf("POST %s %v as %s: %d %v, want %d %s %s", tt.path, tt.body, tt.who, status, out, tt.status, tt.code, tt.field)
		}
	}
	if r := e.must(200, "mo", "POST", ask, map[string]any{"answer": "notes.txt"}); r["turnId"] == "" {
		t.Errorf("answered: %v", r)
	}
	if status, out := e.call("mo", "POST", ask, map[string]any{"answer": "again"}); status != 404 || !strings.Contains(out["error"].(map[string]any)["message"].(string), "answered already") {
		t.Errorf("answering twice: %d %v", status, out)
	}

	// The write waits for approval.
	events.until(t, "chat/toolCallReady")
	tc := e.question(t, "s1", "confirmation")
	if tc["tool"] != "Write" || !strings.Contains(tc["text"].(string), "notes.txt") {
		t.Fatalf("the tool call as shown: %v", tc)
	}
	call := "/v1/sessions/s1/tool-calls/" + tc["id"].(string)
	for _, tt := range []struct {
		who    string
		body   any
		status int
		field  string
	}{
		{"mo", map[string]any{"decision": "maybe"}, 400, "decision"},
		{"mo", map[string]any{"decision": "approve", "option": "always"}, 400, "option"},
		{"gus", map[string]any{"decision": "approve"}, 403, ""},
	} {
		status, out := e.call(tt.who, "POST", call, tt.body)
		if _, field := errCode(out); status != tt.status || field != tt.field {
			t.Errorf("POST %s %v as %s: %d %v, want %d %s", call, tt.body, tt.who, status, out, tt.status, tt.field)
		}
	}
	e.must(200, "mo", "POST", call, map[string]any{"decision": "approve"})
	events.until(t, "chat/turnComplete")
	if data, err := os.ReadFile(filepath.Join(e.work, "notes.txt")); err != nil || string(data) != "hi" {
		t.Errorf("notes.txt: %q, %v", data, err)
	}
	got := e.must(200, "mo", "GET", "/v1/sessions/s1", nil)
	if turns := got["turns"].([]any); !strings.Contains(turns[0].(map[string]any)["response"].(string), "notes.txt") {
		t.Errorf("the turn's reply does not say the answer: %v", turns[0])
	}

	// Once the turn has ended, what it asked is a conflict.
	for _, path := range []string{ask, call} {
		body := map[string]any{"answer": "late"}
		if strings.Contains(path, "tool-calls") {
			body = map[string]any{"decision": "approve"}
		}
		if status, out := e.call("mo", "POST", path, body); status != 409 || out["error"].(map[string]any)["code"] != "turn_ended" {
			t.Errorf("POST %s after the turn: %d %v", path, status, out)
		}
	}

	// Denied, the write does not happen; declined, the question goes
	// unanswered.
	e.must(202, "mo", "POST", "/v1/sessions/s1/turns", map[string]any{"input": "write other.txt x\nask Your name?"})
	events.until(t, "chat/toolCallReady")
	e.must(200, "mo", "POST", "/v1/sessions/s1/tool-calls/"+e.question(t, "s1", "confirmation")["id"].(string), map[string]any{"decision": "deny"})
	events.until(t, "chat/inputRequested")
	e.must(200, "mo", "POST", "/v1/sessions/s1/questions/"+e.question(t, "s1", "input")["id"].(string), map[string]any{"decline": true})
	events.until(t, "chat/turnComplete")
	if _, err := os.Stat(filepath.Join(e.work, "other.txt")); err == nil {
		t.Error("a denied write was written")
	}
	got = e.must(200, "mo", "GET", "/v1/sessions/s1", nil)
	if turns := got["turns"].([]any); !strings.Contains(turns[1].(map[string]any)["response"].(string), "No answer was given") {
		t.Errorf("the declined question's turn: %v", turns[1])
	}
}

// untilAsked reads a session's stream until its turn has asked a
// question: the action, or a snapshot that holds it open.
func untilAsked(t *testing.T, s *stream) {
	t.Helper()
	for {
		ev := s.next(t)
		a, _ := ev.data["action"].(map[string]any)
		if ev.event == "action" && a["type"] == "chat/inputRequested" {
			return
		}
		if data, _ := json.Marshal(ev.data); ev.event == "snapshot" && strings.Contains(string(data), `"kind":"inputRequest"`) && !strings.Contains(string(data), `"response":`) {
			return
		}
	}
}

// TestRunWaitsForInput: a run whose turn asks something says so, and on
// what, in its automation's runs and its own; answered over the API, it
// completes.
func TestRunWaitsForInput(t *testing.T) {
	e := newEnv(t)
	def := automationDef(e)
	def["message"] = map[string]any{"text": "ask Which branch?", "origin": map[string]any{"kind": "automation"}}
	e.must(201, "mo", "POST", "/v1/automations", map[string]any{"id": "asks", "definition": def})
	id := e.must(202, "mo", "POST", "/v1/automations/asks/runs", nil)["id"].(string)
	runEvents := e.events("mo", "/v1/runs/"+id+"/events?after=0")
	session := ""
	for session == "" {
		if ps, ok := e.must(200, "mo", "GET", "/v1/runs/"+id, nil)["primarySession"].(string); ok {
			session = strings.TrimPrefix(ps, "ahp-session:/")
			break
		}
		runEvents.next(t)
	}
	untilAsked(t, e.events("mo", "/v1/sessions/"+session+"/events?after=0"))

	runs := e.must(200, "mo", "GET", "/v1/automations/asks/runs", nil)["runs"].([]any)
	waits, _ := runs[0].(map[string]any)["waitingFor"].([]any)
	if len(waits) != 1 {
		t.Fatalf("the run as listed: %v", runs[0])
	}
	w := waits[0].(map[string]any)
	if w["kind"] != "input" || w["text"] != "Which branch?" || w["session"] != session {
		t.Fatalf("the run waits for %v", w)
	}
	if one := e.must(200, "mo", "GET", "/v1/runs/"+id, nil); len(one["waitingFor"].([]any)) != 1 {
		t.Fatalf("the run as read: %v", one)
	}
	e.must(200, "mo", "POST", "/v1/sessions/"+session+"/questions/"+w["id"].(string), map[string]any{"answer": "main"})
	for {
		st := e.must(200, "mo", "GET", "/v1/runs/"+id, nil)
		if lc := st["lifecycle"].(map[string]any); lc["status"] == "completed" {
			if len(st["waitingFor"].([]any)) != 0 {
				t.Errorf("a completed run waits for %v", st["waitingFor"])
			}
			break
		} else if lc["status"] == "failed" || lc["status"] == "cancelled" {
			t.Fatalf("the run ended %v", lc)
		}
		runEvents.next(t)
	}
}
