package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
)

// keyedPost is POST path with an Idempotency-Key: the status, the body
// as sent, and whether the answer says it was replayed.
func keyedPost(t *testing.T, p *proc, token, path, key string, body any) (int, string, bool) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", "http://"+p.addr+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header.Get("Idempotent-Replayed") == "true"
}

// TestIdempotencyKeyAcrossKill: a script whose POSTs were answered just
// before ahpd was killed sends them again, under the same keys, to the
// daemon restarted: each is answered as the first was, and nothing is
// done twice: one session (made without an id of its own), one turn.
func TestIdempotencyKeyAcrossKill(t *testing.T) {
	e := newEnv(t)
	p := serveDaemon(t, e)
	token := e.token(t)
	create := map[string]any{"provider": "script", "folder": e.work, "input": "say one"}
	status, made, _ := keyedPost(t, p, token, "/v1/sessions", "make-1", create)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %d %s", status, made)
	}
	var session struct{ ID string }
	if err := json.Unmarshal([]byte(made), &session); err != nil || session.ID == "" {
		t.Fatalf("the session made: %v %s", err, made)
	}
	turnPath := "/v1/sessions/" + session.ID + "/turns"
	status, sent, _ := keyedPost(t, p, token, turnPath, "turn-2", map[string]any{"input": "say two"})
	if status != http.StatusAccepted {
		t.Fatalf("POST turns: %d %s", status, sent)
	}
	p.signal(syscall.SIGKILL)
	p.wait(exitTimeout)

	p = serveDaemon(t, e)
	if status, again, replayed := keyedPost(t, p, token, "/v1/sessions", "make-1", create); status != http.StatusCreated || !replayed || again != made {
		t.Fatalf("POST /v1/sessions sent again after a kill: %d replayed %v\n%s\nwant the first answer\n%s", status, replayed, again, made)
	}
	if status, again, replayed := keyedPost(t, p, token, turnPath, "turn-2", map[string]any{"input": "say two"}); status != http.StatusAccepted || !replayed || again != sent {
		t.Fatalf("POST turns sent again after a kill: %d replayed %v %s, want %s", status, replayed, again, sent)
	}
	status, list := apiCall(t, p, token, "GET", "/v1/sessions", nil)
	if sessions, _ := list["sessions"].([]any); status != http.StatusOK || len(sessions) != 1 {
		t.Fatalf("GET /v1/sessions: %d, %d sessions, want 1: %v", status, len(sessions), list)
	}
	status, view := apiCall(t, p, token, "GET", "/v1/sessions/"+session.ID, nil)
	turns, _ := view["turns"].([]any)
	queued, _ := view["queuedTurns"].([]any)
	if status != http.StatusOK || len(turns)+len(queued) != 2 {
		t.Fatalf("the session after the retries: %d, %d turns and %d queued, want 2 in all: %v", status, len(turns), len(queued), view)
	}
}
