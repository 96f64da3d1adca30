package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAutomationsPage checks that a person sees their automations, with
// their triggers and runs, and nobody else's.
func TestAutomationsPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := func(method, path string, body any) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+e.tokens["mo"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	api("POST", "/v1/automations", map[string]any{"id": "hello", "definition": map[string]any{
		"title":    "Say <hello>",
		"message":  map[string]any{"text": "say hello", "origin": map[string]any{"kind": "automation"}},
		"session":  map[string]any{"provider": "script"},
		"enabled":  true,
		"triggers": []any{},
	}})
	api("POST", "/v1/automations/hello/runs", map[string]any{})

	r := e.signIn("mo").get("/ui/automations")
	for _, want := range []string{"Say &lt;hello&gt;", "enabled", "started by hand", `<th scope="row" class="path">ahp-automation-run:/`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("mo's automations page lacks %q: %s", want, r.body)
		}
	}
	if r := e.signIn("gus").get("/ui/automations"); strings.Contains(r.body, "hello") || !strings.Contains(r.body, "No automations you may see") {
		t.Errorf("gus sees mo's automation: %s", r.body)
	}
}
