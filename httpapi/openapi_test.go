package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPICoversRoutes: every route the API serves is in the
// document, with nothing else, and each schema the document holds
// compiles as JSON Schema 2020-12 (OpenAPI 3.1's dialect).
func TestOpenAPICoversRoutes(t *testing.T) {
	a := New(Options{})
	rec := httptest.NewRecorder()
	a.openAPI(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("the document: %d %v", rec.Code, err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	var documented, served []string
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, r := range a.routes() {
		served = append(served, r.method+" "+r.path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented %v\nserved %v", documented, served)
	}

	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	for name := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if _, err := c.Compile("openapi.json#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
	// Every $ref points at a schema that is there (Compile of each path's
	// schemas resolves them).
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			data, _ := json.Marshal(o)
			if strings.Contains(string(data), `"$ref":"#/components/schemas/`) {
				for _, part := range strings.Split(string(data), `"$ref":"#/components/schemas/`)[1:] {
					name := part[:strings.IndexByte(part, '"')]
					if _, ok := doc["components"].(map[string]any)["schemas"].(map[string]any)[name]; !ok {
						t.Errorf("%s %s refers to a schema %s that is not there", method, path, name)
					}
				}
			}
		}
	}
}

// TestOpenAPIAnswerSchemas: the bodies of the answer routes are what the
// handlers take, and nothing else.
func TestOpenAPIAnswerSchemas(t *testing.T) {
	data, _ := json.Marshal(document())
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		schema, body string
		ok           bool
	}{
		{"Answer", `{"answer": "notes.txt"}`, true},
		{"Answer", `{"answer": 3}`, true},
		{"Answer", `{"answer": ["a", "b"]}`, true},
		{"Answer", `{"answers": {"name": "ada", "sure": true}}`, true},
		{"Answer", `{"decline": true}`, true},
		{"Answer", `{}`, false},
		{"Answer", `{"decline": false}`, false},
		{"Answer", `{"answer": "x", "decline": true}`, false},
		{"Answer", `{"answer": "x", "answers": {}}`, false},
		{"Answer", `{"answer": {"x": 1}}`, false},
		{"Answer", `{"colour": "red"}`, false},
		{"Confirm", `{"decision": "approve"}`, true},
		{"Confirm", `{"decision": "deny", "option": "no"}`, true},
		{"Confirm", `{"decision": "maybe"}`, false},
		{"Confirm", `{}`, false},
	} {
		s, err := c.Compile("openapi.json#/components/schemas/" + tt.schema)
		if err != nil {
			t.Fatal(err)
		}
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(tt.body))
		if err := s.Validate(inst); (err == nil) != tt.ok {
			t.Errorf("%s %s: valid %v, want %v (%v)", tt.schema, tt.body, err == nil, tt.ok, err)
		}
	}
}

// TestOpenAPICreateSessionSchema: CreateSession names exactly the members
// POST /v1/sessions takes (mode, which it refuses, aside), and its
// permissions and inputTimeout take what the host does and nothing else.
func TestOpenAPICreateSessionSchema(t *testing.T) {
	data, _ := json.Marshal(document())
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	props := doc["components"].(map[string]any)["schemas"].(map[string]any)["CreateSession"].(map[string]any)["properties"].(map[string]any)
	var documented, taken []string
	for name := range props {
		documented = append(documented, name)
	}
	bt := reflect.TypeOf(createBody{})
	for i := range bt.NumField() {
		if name, _, _ := strings.Cut(bt.Field(i).Tag.Get("json"), ","); name != "mode" {
			taken = append(taken, name)
		}
	}
	slices.Sort(documented)
	slices.Sort(taken)
	if !slices.Equal(documented, taken) {
		t.Errorf("CreateSession documents %v; the handler takes %v", documented, taken)
	}

	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("openapi.json#/components/schemas/CreateSession")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{}`, true},
		{`{"permissions": {}}`, true},
		{`{"permissions": {"mode": "acceptEdits", "allow": ["execute", "edit(src/**)", "*(docs/*.md)"], "deny": ["WebFetch", " Bash "]}}`, true},
		{`{"permissions": {"mode": "bypass"}, "inputTimeout": "30m"}`, true},
		{`{"inputTimeout": "1h30m"}`, true},
		{`{"inputTimeout": "0"}`, true},
		{`{"inputTimeout": 600}`, true},
		{`{"inputTimeout": 0}`, true},
		{`{"config": {"isolation": "worktree"}, "worktree": true, "metadata": {"k": "v"}}`, true},
		{`{"permissions": {"mode": "yolo"}}`, false},
		{`{"permissions": {"denny": ["Bash"]}}`, false},
		{`{"permissions": {"allow": "Bash"}}`, false},
		{`{"permissions": {"deny": [""]}}`, false},
		{`{"permissions": {"deny": ["Bash git"]}}`, false},
		{`{"permissions": {"deny": ["edit()"]}}`, false},
		{`{"permissions": {"deny": [3]}}`, false},
		{`{"permissions": "bypass"}`, false},
		{`{"inputTimeout": "soon"}`, false},
		{`{"inputTimeout": -1}`, false},
		{`{"inputTimeout": 2592001}`, false},
		{`{"inputTimeout": true}`, false},
		{`{"mode": "agent"}`, false},
		{`{"colour": "red"}`, false},
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(inst); (err == nil) != tt.ok {
			t.Errorf("CreateSession %s: valid %v, want %v (%v)", tt.body, err == nil, tt.ok, err)
		}
	}
}
