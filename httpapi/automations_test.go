package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/automations/asowner"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/httpapi"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
)

func automationDef(e *env) map[string]any {
	return map[string]any{
		"title":    "Hello",
		"message":  map[string]any{"text": "say hello", "origin": map[string]any{"kind": "automation"}},
		"session":  map[string]any{"provider": "script", "workingDirectories": []string{"file://" + e.work}},
		"enabled":  true,
		"triggers": []any{},
	}
}

// TestAutomations makes an automation, runs it, follows the run to its
// end and removes it.
func TestAutomations(t *testing.T) {
	e := newEnv(t)
	if tr := e.must(200, "mo", "GET", "/v1/automation-triggers", nil)["triggers"].([]any); len(tr) == 0 {
		t.Fatal("no event triggers listed")
	}
	created := e.must(201, "mo", "POST", "/v1/automations", map[string]any{"id": "hello", "definition": automationDef(e)})
	if created["resource"] != "ahp-automation:/hello" {
		t.Fatalf("created %v", created)
	}
	code, out := e.call("mo", "POST", "/v1/automations", map[string]any{"id": "bad", "definition": map[string]any{"title": "x"}})
	if code != http.StatusBadRequest {
		t.Fatalf("a definition the host refuses: %d %v", code, out)
	}
	if list := e.must(200, "mo", "GET", "/v1/automations", nil)["automations"].([]any); len(list) != 1 {
		t.Fatalf("list %v", list)
	}
	// Another person sees none of mo's.
	if list := e.must(200, "root", "GET", "/v1/automations", nil)["automations"].([]any); len(list) != 0 {
		t.Fatalf("root sees %v", list)
	}
	e.must(200, "mo", "GET", "/v1/automations/hello", nil)

	run := e.must(202, "mo", "POST", "/v1/automations/hello/runs", map[string]any{"requestId": "r1"})
	id := run["id"].(string)
	again := e.must(202, "mo", "POST", "/v1/automations/hello/runs", map[string]any{"requestId": "r1"})
	if again["id"] != id {
		t.Fatalf("a retry started run %v, not %v", again["id"], id)
	}
	events := e.events("mo", "/v1/runs/"+id+"/events?after=0")
	events.next(t) // ready
	for {
		st := e.must(200, "mo", "GET", "/v1/runs/"+id, nil)
		if lc := st["lifecycle"].(map[string]any); lc["status"] == "completed" {
			break
		} else if lc["status"] == "failed" || lc["status"] == "cancelled" {
			t.Fatalf("the run ended %v", lc)
		}
		if ev := events.next(t); ev.event != "action" && ev.event != "snapshot" {
			t.Fatalf("event %v", ev)
		}
	}
	if runs := e.must(200, "mo", "GET", "/v1/automations/hello/runs", nil)["runs"].([]any); len(runs) != 1 {
		t.Fatalf("runs %v", runs)
	}
	e.must(204, "mo", "DELETE", "/v1/automations/hello", nil)
	e.must(404, "mo", "GET", "/v1/automations/hello", nil)
}

// newOpenAPI is an API of a host that asks no token.
func newOpenAPI(t *testing.T) http.Handler {
	t.Helper()
	state := t.TempDir()
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts"))); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll(filepath.Join(state, "work"), 0o755)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(host.Options{StateDir: state, Backends: backends, Logger: log, DefaultDirectory: filepath.Join(state, "work"),
		Automations: host.AutomationOptions{NewRunner: func(h host.RunnerHost) automations.Runner { return asowner.New(h) }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	return httpapi.New(httpapi.Options{Host: h, Open: true, Listen: "127.0.0.1:9", Logger: log})
}

func httptestRequest(method, path string) *http.Request {
	return httptest.NewRequest(method, path, nil)
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}
