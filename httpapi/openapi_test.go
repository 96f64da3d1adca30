package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
