package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestStrictBodies: a body is one JSON value, in UTF-8, naming each
// member once, and an automation's definition holds only the members
// and kinds AHP defines. Each refusal is a 400 naming the member where
// there is one, with a message that does not hand a long client string
// back whole; nothing is made.
func TestStrictBodies(t *testing.T) {
	e := newEnv(t)
	before := e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "s1"})["title"]
	long := strings.Repeat("k", 4096)
	// def is a valid definition, as JSON, with edit applied to it.
	def := func(edit func(d map[string]any)) string {
		d := automationDef(e)
		d["triggers"] = []any{map[string]any{"kind": "schedule", "id": "night",
			"schedule": map[string]any{"expression": "0 2 * * 1-5", "timeZone": "Europe/Berlin"}}}
		if edit != nil {
			edit(d)
		}
		data, err := json.Marshal(map[string]any{"definition": d})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	session := func(d map[string]any) map[string]any { return d["session"].(map[string]any) }
	message := func(d map[string]any) map[string]any { return d["message"].(map[string]any) }
	trigger := func(d map[string]any) map[string]any { return d["triggers"].([]any)[0].(map[string]any) }

	tests := []struct {
		name, method, path, body string
		field                    string // "" when none is named
		says                     string // in the message
	}{
		{"trailing garbage", "POST", "/v1/sessions", `{} xyz`, "", "after its JSON value"},
		{"a second value", "POST", "/v1/sessions/s1/turns", `{"input": "say a"} {"input": "say b"}`, "", "after its JSON value"},
		{"trailing garbage, no space", "PATCH", "/v1/sessions/s1", `{"title": "a"}]`, "", "after its JSON value"},
		{"duplicate at the top", "POST", "/v1/sessions", `{"title":"a","title":"b"}`, "title", "given twice"},
		{"duplicate in metadata", "PATCH", "/v1/sessions/s1", `{"metadata": {"k": "a", "k": "b"}}`, "metadata.k", "given twice"},
		{"duplicate in permissions", "POST", "/v1/sessions", `{"permissions": {"mode": "bypass", "mode": "ask"}}`, "permissions.mode", "given twice"},
		{"duplicate in an array's object", "POST", "/v1/automations",
			`{"definition": {"triggers": [{"kind": "schedule", "id": "a", "id": "b"}]}}`, "definition.triggers[0].id", "given twice"},
		{"duplicate, a long name", "POST", "/v1/sessions", `{"` + long + `": 1, "` + long + `": 2}`, "", "given twice"},
		{"not UTF-8", "POST", "/v1/sessions", "{\"title\": \"\xff\"}", "", "not valid JSON"},
		{"an unknown member, a long name", "POST", "/v1/sessions", `{"` + long + `": 1}`, "", "not a member"},
		{"a definition's unknown member", "POST", "/v1/automations", def(func(d map[string]any) { d["owner"] = "alice" }),
			"definition.owner", `"owner" is not a member of definition`},
		{"a session template's", "POST", "/v1/automations", def(func(d map[string]any) { session(d)["owner"] = "alice" }),
			"definition.session.owner", "not a member of definition.session"},
		{"a message's", "POST", "/v1/automations", def(func(d map[string]any) { message(d)["owner"] = "alice" }),
			"definition.message.owner", "not a member of definition.message"},
		{"a model's", "POST", "/v1/automations", def(func(d map[string]any) { session(d)["model"] = map[string]any{"id": "m", "owner": "alice"} }),
			"definition.session.model.owner", "not a member"},
		{"a trigger's", "POST", "/v1/automations", def(func(d map[string]any) { trigger(d)["owner"] = "alice" }),
			"definition.triggers[0].owner", "not a member of definition.triggers[0]"},
		{"a schedule's", "POST", "/v1/automations", def(func(d map[string]any) { trigger(d)["schedule"].(map[string]any)["owner"] = "alice" }),
			"definition.triggers[0].schedule.owner", "not a member"},
		{"an attachment of no known kind", "POST", "/v1/automations", def(func(d map[string]any) {
			message(d)["attachments"] = []any{map[string]any{"type": "bogus"}}
		}), "definition.message.attachments[0]", `"bogus" is not a kind`},
		{"a customization's child enablement", "POST", "/v1/automations", def(func(d map[string]any) {
			session(d)["customizations"] = []any{map[string]any{"type": "plugin", "id": "p", "uri": "file:///p", "name": "p",
				"childEnablement": map[string]any{"c": []any{map[string]any{"kind": "global", "enabled": true, "owner": "alice"}}}}}
		}), `definition.session.customizations[0].childEnablement["c"][0].owner`, "(and the one naming its kind)"},
		{"a definition's long unknown member", "POST", "/v1/automations", def(func(d map[string]any) { d[long] = 1 }), "", "not a member of definition"},
		{"a definition's member of the wrong type", "POST", "/v1/automations", def(func(d map[string]any) { d["enabled"] = "yes" }),
			"definition.enabled", "expected boolean"},
		{"a definition without its title", "POST", "/v1/automations", def(func(d map[string]any) { delete(d, "title") }),
			"definition.title", "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := e.call("mo", tt.method, tt.path, tt.body)
			errObj, _ := out["error"].(map[string]any)
			if code != http.StatusBadRequest || errObj == nil || errObj["code"] != "invalid_request" {
				t.Fatalf("%d %v, want 400 invalid_request", code, out)
			}
			if field, _ := errObj["field"].(string); field != tt.field {
				t.Errorf("field %q, want %q (%v)", field, tt.field, errObj["message"])
			}
			msg, _ := errObj["message"].(string)
			if !strings.Contains(msg, tt.says) {
				t.Errorf("message %q, want it to say %q", msg, tt.says)
			}
			if len(msg) > 400 {
				t.Errorf("a message of %d bytes: %.100q…", len(msg), msg)
			}
		})
	}
	if list := e.must(200, "mo", "GET", "/v1/automations", nil)["automations"].([]any); len(list) != 0 {
		t.Errorf("refused definitions made automations: %v", list)
	}
	if got := e.must(200, "mo", "GET", "/v1/sessions/s1", nil); got["title"] != before {
		t.Errorf("a refused PATCH set the title %q", got["title"])
	}

	// What is well formed is taken: whitespace around the value, the
	// protocol's open objects (_meta) with members of their own.
	e.must(201, "mo", "POST", "/v1/sessions", " {\"id\": \"s2\"}\r\n\t ")
	made := e.must(201, "mo", "POST", "/v1/automations", def(func(d map[string]any) {
		d["_meta"] = map[string]any{"team.ticket": "ENG-1"}
		message(d)["_meta"] = map[string]any{"anything": true}
	}))
	if d := made["definition"].(map[string]any); d["_meta"].(map[string]any)["team.ticket"] != "ENG-1" {
		t.Errorf("made %v", d)
	}
}

// TestBodyMediaType: a body is taken as application/json or with no
// Content-Type; one a form (or a page's text/plain fetch) sends is 415,
// as a page of another site may send those without a CORS preflight.
func TestBodyMediaType(t *testing.T) {
	e := newEnv(t)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		code, _, out := e.callWith(http.Header{"Content-Type": {ct}}, "mo", "POST", "/v1/sessions", `{"title": "a"}`)
		if errObj, _ := out["error"].(map[string]any); code != http.StatusUnsupportedMediaType || errObj["code"] != "unsupported_media_type" {
			t.Errorf("Content-Type %s: %d %v, want 415 unsupported_media_type", ct, code, out)
		}
	}
	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "typed"})
	if code, _, out := e.callWith(http.Header{"Content-Type": {"application/json; charset=utf-8"}}, "mo", "POST", "/v1/sessions", `{"id": "charset"}`); code != 201 {
		t.Errorf("application/json with a charset: %d %v", code, out)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/sessions", strings.NewReader(`{"id": "untyped"}`))
	req.Header.Set("Authorization", "Bearer "+e.tokens["mo"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("a body with no Content-Type: %d, want 201", resp.StatusCode)
	}
}
