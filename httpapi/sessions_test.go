package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// TestSessionLifecycle walks a session through every session endpoint
// as a member: create with a first message, follow it on the event
// stream, read it, change it, send, suspend and resume, remove.
func TestSessionLifecycle(t *testing.T) {
	e := newEnv(t)
	created := e.must(201, "mo", "POST", "/v1/sessions", map[string]any{
		"id": "s1", "title": "Fix tests", "folder": e.work, "metadata": map[string]any{"ticket": "ENG-123"},
	})
	if created["id"] != "s1" || created["title"] != "Fix tests" || created["provider"] != "script" {
		t.Fatalf("created %v", created)
	}
	if m, _ := created["metadata"].(map[string]any); m["ticket"] != "ENG-123" {
		t.Fatalf("metadata %v", created["metadata"])
	}

	// The stream replays from 0: the turn's actions are all in it.
	events := e.events("mo", "/v1/sessions/s1/events?after=0")
	if ready := events.next(t); ready.event != "ready" {
		t.Fatalf("first event %v", ready)
	}
	sent := e.must(202, "mo", "POST", "/v1/sessions/s1/turns", map[string]any{"input": "say hello", "id": "t1"})
	if sent["turnId"] != "t1" || sent["queued"] != false {
		t.Fatalf("sent %v", sent)
	}
	seen := events.until(t, "chat/turnComplete")
	if !slices.Contains(seen, "chat/turnStarted") {
		t.Fatalf("the stream showed %v, without the turn's start", seen)
	}
	events.close()

	got := e.must(200, "mo", "GET", "/v1/sessions/s1", nil)
	turns, _ := got["turns"].([]any)
	if len(turns) != 1 || got["status"] != "idle" || got["activeTurn"] != nil {
		t.Fatalf("session %v", got)
	}
	if tv := turns[0].(map[string]any); tv["state"] != "complete" || !strings.Contains(tv["response"].(string), "hello") {
		t.Fatalf("turn %v", tv)
	}
	seq := int64(got["lastSeq"].(float64))
	e.must(200, "mo", "GET", fmt.Sprintf("/v1/sessions/s1?minSeq=%d", seq), nil)
	if _, out := e.call("mo", "GET", fmt.Sprintf("/v1/sessions/s1?minSeq=%d", seq+1000), nil); out["error"].(map[string]any)["code"] != "timeout" {
		t.Fatalf("a minSeq never reached: %v", out)
	}

	list := e.must(200, "mo", "GET", "/v1/sessions", nil)
	if ss := list["sessions"].([]any); len(ss) != 1 || ss[0].(map[string]any)["id"] != "s1" {
		t.Fatalf("list %v", list)
	}

	patched := e.must(200, "mo", "PATCH", "/v1/sessions/s1", map[string]any{
		"title": "Fixed", "archived": true, "metadata": map[string]any{"ticket": nil, "team": "core"},
	})
	if patched["title"] != "Fixed" || patched["archived"] != true {
		t.Fatalf("patched %v", patched)
	}
	if m := patched["metadata"].(map[string]any); len(m) != 1 || m["team"] != "core" {
		t.Fatalf("metadata merged to %v", m)
	}
	if ss := e.must(200, "mo", "GET", "/v1/sessions", nil)["sessions"].([]any); len(ss) != 0 {
		t.Fatalf("an archived session is listed without ?archived=true: %v", ss)
	}
	if ss := e.must(200, "mo", "GET", "/v1/sessions?archived=true", nil)["sessions"].([]any); len(ss) != 1 {
		t.Fatalf("archived listing %v", ss)
	}

	if r := e.must(200, "mo", "POST", "/v1/sessions/s1/suspend", nil); r["residency"] != "suspended" {
		t.Fatalf("suspend %v", r)
	}
	if r := e.must(200, "mo", "GET", "/v1/sessions/s1", nil); r["status"] != "suspended" {
		t.Fatalf("a suspended session reads %v", r["status"])
	}
	// Asleep, the session's changes are no longer held for a replay: a
	// stream from 0 gets its state, and is told why.
	events = e.events("mo", "/v1/sessions/s1/events?after=0")
	if ready := events.next(t); ready.event != "ready" || ready.data["replayed"] != false {
		t.Fatalf("a stream from 0 of a sleeping session: %v", ready)
	}
	if snap := events.next(t); snap.event != "snapshot" || snap.data["reason"] != "too_far_behind" {
		t.Fatalf("then %v %v", snap.event, snap.data["reason"])
	}
	events.close()
	if r := e.must(200, "mo", "POST", "/v1/sessions/s1/resume", nil); r["residency"] != "active" {
		t.Fatalf("resume %v", r)
	}
	e.must(204, "mo", "DELETE", "/v1/sessions/s1", nil)
	e.must(404, "mo", "GET", "/v1/sessions/s1", nil)
}

// TestCreateWithInput starts the first turn from the create request.
func TestCreateWithInput(t *testing.T) {
	e := newEnv(t)
	created := e.must(201, "root", "POST", "/v1/sessions", map[string]any{"input": "wait 60"})
	id := created["id"].(string)
	at, _ := created["activeTurn"].(map[string]any)
	if at == nil || at["input"] != "wait 60" || created["status"] != "running" {
		t.Fatalf("created %v", created)
	}
	// A second message waits its turn.
	if r := e.must(202, "root", "POST", "/v1/sessions/"+id+"/turns", map[string]any{"input": "say next"}); r["queued"] != true {
		t.Fatalf("a message sent while a turn runs: %v", r)
	}
	got := e.must(200, "root", "GET", "/v1/sessions/"+id, nil)
	if q := got["queuedTurns"].([]any); len(q) != 1 || q[0].(map[string]any)["input"] != "say next" {
		t.Fatalf("queued %v", got["queuedTurns"])
	}
	e.must(202, "root", "POST", "/v1/sessions/"+id+"/cancel", nil)
}

// TestSuspendWhileBusy: a running turn with nothing open refuses a
// suspend with 409 session_busy, ifIdle leaves it be, and once cancelled
// the session suspends.
func TestSuspendWhileBusy(t *testing.T) {
	e := newEnv(t)
	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "busy"})
	events := e.events("mo", "/v1/sessions/busy/events")
	events.next(t) // ready
	e.must(202, "mo", "POST", "/v1/sessions/busy/turns", map[string]any{"input": "wait 60"})
	code, out := e.call("mo", "POST", "/v1/sessions/busy/suspend", nil)
	if code != http.StatusConflict || out["error"].(map[string]any)["code"] != "session_busy" {
		t.Fatalf("suspend while busy: %d %v", code, out)
	}
	if r := e.must(200, "mo", "POST", "/v1/sessions/busy/suspend", map[string]any{"ifIdle": true}); r["residency"] != "active" {
		t.Fatalf("ifIdle on a busy session: %v", r)
	}
	e.must(202, "mo", "POST", "/v1/sessions/busy/cancel", nil)
	events.until(t, "chat/turnCancelled")
	events.close() // a watched session keeps its turns in memory
	// The agent stops a moment after the cancel is told, and the host
	// sees the watcher go a moment after the stream closes: until then a
	// suspend is refused as busy, or lets the agent go but keeps the
	// turns (residency active).
	deadline := time.Now().Add(testwait.Hang)
	for {
		code, r := e.call("mo", "POST", "/v1/sessions/busy/suspend", nil)
		if code == 200 && r["residency"] == "suspended" {
			break
		}
		notYet := code == http.StatusConflict || (code == 200 && r["residency"] == "active")
		if !notYet || time.Now().After(deadline) {
			t.Fatalf("suspend after cancelling: %d %v", code, r)
		}
	}
}

// TestBadInput: each bad request is a 400 naming its field.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "s1"})
	long := strings.Repeat("x", 501)
	tests := []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/v1/sessions", map[string]any{"title": 5}, "title"},
		{"POST", "/v1/sessions", map[string]any{"bogus": 1}, "bogus"},
		{"POST", "/v1/sessions", map[string]any{"folder": "relative/dir"}, "folder"},
		{"POST", "/v1/sessions", map[string]any{"id": "a/b"}, "id"},
		{"POST", "/v1/sessions", map[string]any{"mode": "plan"}, "mode"},
		{"POST", "/v1/sessions", map[string]any{"provider": "nope"}, "provider"},
		{"POST", "/v1/sessions", map[string]any{"input": "  "}, "input"},
		{"POST", "/v1/sessions", map[string]any{"metadata": map[string]any{"k": long}}, "metadata.k"},
		{"POST", "/v1/sessions", map[string]any{"metadata": map[string]any{strings.Repeat("k", 41): "v"}}, "metadata"},
		{"POST", "/v1/sessions", `{"title":`, ""},
		{"PATCH", "/v1/sessions/s1", map[string]any{"title": strings.Repeat("t", 201)}, "title"},
		{"PATCH", "/v1/sessions/s1", map[string]any{"archived": "yes"}, "archived"},
		{"POST", "/v1/sessions/s1/turns", map[string]any{}, "input"},
		{"POST", "/v1/sessions/s1/turns", map[string]any{"input": "say x", "id": "bad id"}, "id"},
		{"POST", "/v1/sessions/s1/suspend", map[string]any{"ifIdle": "no"}, "ifIdle"},
		{"GET", "/v1/sessions/s1?minSeq=-1", nil, "minSeq"},
		{"GET", "/v1/sessions?limit=0", nil, "limit"},
		{"GET", "/v1/sessions/s1/events?after=x", nil, "after"},
		{"POST", "/v1/automations", map[string]any{}, "definition"},
		{"POST", "/v1/automations/x/runs", map[string]any{"requestId": "a b"}, "requestId"},
	}
	for _, tt := range tests {
		code, out := e.call("mo", tt.method, tt.path, tt.body)
		errObj, _ := out["error"].(map[string]any)
		if code != http.StatusBadRequest || errObj == nil || (errObj["field"] != nil && errObj["field"] != tt.field) || (tt.field != "" && errObj["field"] != tt.field) {
			t.Errorf("%s %s %v: %d %v, want 400 naming %q", tt.method, tt.path, tt.body, code, out, tt.field)
		}
		if msg, _ := errObj["message"].(string); msg == "" || len(msg) > 400 {
			t.Errorf("%s %s: the message %q", tt.method, tt.path, msg)
		}
	}
	// A body past 1 MiB is refused whole.
	big := `{"input": "` + strings.Repeat("x", 1<<20) + `"}`
	if code, _ := e.call("mo", "POST", "/v1/sessions/s1/turns", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of more than 1 MiB: %d", code)
	}
}

// TestNotFoundAndAuth: unknown ids are 404, a wrong or missing token
// 401, and a guest may read but not write.
func TestNotFoundAndAuth(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/sessions/nope"}, {"PATCH", "/v1/sessions/nope"}, {"DELETE", "/v1/sessions/nope"},
		{"POST", "/v1/sessions/nope/turns"}, {"POST", "/v1/sessions/nope/suspend"}, {"POST", "/v1/sessions/nope/resume"},
		{"POST", "/v1/sessions/nope/cancel"}, {"GET", "/v1/sessions/nope/events"},
		{"GET", "/v1/automations/nope"}, {"DELETE", "/v1/automations/nope"}, {"GET", "/v1/automations/nope/runs"},
		{"POST", "/v1/automations/nope/runs"}, {"GET", "/v1/runs/nope"}, {"POST", "/v1/runs/nope/cancel"},
		{"GET", "/v1/runs/nope/events"}, {"GET", "/v1/no-such-route"},
	} {
		var body any
		if r.method == "POST" || r.method == "PATCH" {
			body = map[string]any{}
			if strings.HasSuffix(r.path, "/turns") {
				body = map[string]any{"input": "say hi"}
			}
		}
		if code, out := e.call("mo", r.method, r.path, body); code != http.StatusNotFound || out["error"].(map[string]any)["code"] != "not_found" {
			t.Errorf("%s %s: %d %v, want 404", r.method, r.path, code, out)
		}
	}

	for _, who := range []string{"", "wrong-token"} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/sessions", nil)
		if who != "" {
			req.Header.Set("Authorization", "Bearer "+who)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %q", who, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// ?tkn= works as the WebSocket's does.
	if resp, err := http.Get(e.srv.URL + "/v1/sessions?tkn=" + e.tokens["mo"]); err != nil || resp.StatusCode != 200 {
		t.Fatalf("?tkn=: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	e.must(200, "gus", "GET", "/v1/sessions", nil)
	code, out := e.call("gus", "POST", "/v1/sessions", map[string]any{"title": "mine"})
	if code != http.StatusForbidden || out["error"].(map[string]any)["code"] != "forbidden" || !strings.Contains(out["error"].(map[string]any)["message"].(string), "session:create") {
		t.Fatalf("a guest creating a session: %d %v", code, out)
	}
	code, out = e.call("gus", "POST", "/v1/automations", map[string]any{"definition": automationDef(e)})
	if code != http.StatusForbidden {
		t.Fatalf("a guest creating an automation: %d %v", code, out)
	}
}

// TestOpenHostChecksHostName: a host that asks no token takes no request
// for a name of another site's, nor from a page of another origin.
func TestOpenHostChecksHostName(t *testing.T) {
	h := newOpenAPI(t)
	for _, tt := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:9", "", 200},
		{"localhost:9", "http://localhost:9", 200},
		{"evil.example:9", "", 403},
		{"127.0.0.1:9", "http://evil.example", 403},
	} {
		req := httptestRequest("GET", "/v1/automation-triggers")
		req.Host = tt.host
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		rec := serve(h, req)
		if rec.Code != tt.want {
			t.Errorf("Host %s Origin %q: %d, want %d: %s", tt.host, tt.origin, rec.Code, tt.want, rec.Body)
		}
	}
}

// TestListedOnceCreated: a session is in its creator's listing as soon as
// its creation is answered, with a first message or without one, every
// time: the caller reads its own write.
func TestListedOnceCreated(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		body := map[string]any{"id": fmt.Sprintf("rw%d", i)}
		if i%2 == 0 {
			body["input"] = "say hello"
		}
		e.must(201, "mo", "POST", "/v1/sessions", body)
		list := e.must(200, "mo", "GET", "/v1/sessions", nil)["sessions"].([]any)
		if !slices.ContainsFunc(list, func(s any) bool { return s.(map[string]any)["id"] == body["id"] }) {
			t.Fatalf("session %s, just created, is not listed: %v", body["id"], list)
		}
	}
}

// TestCreateWithIdempotencyKey: POST /v1/sessions sent again under its
// Idempotency-Key makes no second session and runs no second turn: the
// answer is the first's, marked replayed.
func TestCreateWithIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	key := http.Header{"Idempotency-Key": {"create-1"}}
	body := map[string]any{"input": "say once"}
	status, _, first := e.callWith(key, "mo", "POST", "/v1/sessions", body)
	if status != 201 {
		t.Fatalf("the first: %d %v", status, first)
	}
	status, header, again := e.callWith(key, "mo", "POST", "/v1/sessions", body)
	if status != 201 || header.Get("Idempotent-Replayed") != "true" || again["id"] != first["id"] {
		t.Fatalf("sent again: %d, replayed %q, id %v (the first's %v)", status, header.Get("Idempotent-Replayed"), again["id"], first["id"])
	}
	if ss := e.must(200, "mo", "GET", "/v1/sessions", nil)["sessions"].([]any); len(ss) != 1 {
		t.Errorf("%d sessions, want 1", len(ss))
	}
	if status, _, out := e.callWith(key, "mo", "POST", "/v1/sessions", map[string]any{"input": "say twice"}); status != 422 {
		t.Errorf("another request under the key: %d %v, want 422", status, out)
	}
}
