// Package protocoltest checks values against the official AHP JSON schemas
// and finds the protocol's conformance vectors, for tests anywhere in ahpd.
//
// The schemas are read from $AHP_SCHEMA_DIR and the vectors from
// $AHP_TEST_CASES; by default both come from ../shared/ahp beside the
// module. They are not copied into the project.
package protocoltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ahpd/ahpd/protocol/internal/extensions"
)

// schemaFiles are the five schema files, in the order a definition is looked
// up: each file repeats the definitions it references.
var schemaFiles = []string{"state", "actions", "commands", "notifications", "errors"}

// SchemaDir returns the directory holding the AHP *.schema.json files.
func SchemaDir() (string, error) {
	return sharedDir("AHP_SCHEMA_DIR", "schema")
}

// TestCasesDir returns the directory holding the conformance vectors
// (reducers/ and round-trips/).
func TestCasesDir() (string, error) {
	return sharedDir("AHP_TEST_CASES", "test-cases")
}

func sharedDir(env, leaf string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "..", "shared", "ahp", leaf)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("AHP %s not found at %s: set $%s to the directory", leaf, dir, env)
	}
	return dir, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Schemas validates JSON values against named definitions of the official
// schemas. It is safe for concurrent use.
type Schemas struct {
	compiler *jsonschema.Compiler
	home     map[string]string // definition name -> schema file URL

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// Load reads the five schema files in dir.
func Load(dir string) (*Schemas, error) {
	s := &Schemas{
		compiler: jsonschema.NewCompiler(),
		home:     map[string]string{},
		compiled: map[string]*jsonschema.Schema{},
	}
	for _, name := range schemaFiles {
		path := filepath.Join(dir, name+".schema.json")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		root, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a JSON object", path)
		}
		dropEmptyRefs(root)
		widenBitsets(root)
		if err := addExtensions(root); err != nil {
			return nil, err
		}
		url, _ := root["$id"].(string)
		if url == "" {
			url = "file://" + path
		}
		if err := s.compiler.AddResource(url, root); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defs, _ := root["$defs"].(map[string]any)
		for def := range defs {
			if _, seen := s.home[def]; !seen {
				s.home[def] = url
			}
		}
	}
	return s, nil
}

// dropEmptyRefs removes the `{"$ref": "#/$defs/"}` members the upstream
// generator left in some oneOf lists (the StateAction union): they point at
// nothing, and a strict validator refuses to compile them. The files on disk
// are left as they are.
func dropEmptyRefs(v any) {
	switch x := v.(type) {
	case map[string]any:
		if list, ok := x["oneOf"].([]any); ok {
			kept := list[:0]
			for _, item := range list {
				if m, ok := item.(map[string]any); ok && m["$ref"] == "#/$defs/" {
					continue
				}
				kept = append(kept, item)
			}
			x["oneOf"] = kept
		}
		for _, e := range x {
			dropEmptyRefs(e)
		}
	case []any:
		for _, e := range x {
			dropEmptyRefs(e)
		}
	}
}

// addExtensions adds the definitions ahpd speaks that came after the
// schema files, as the generated types have them, so what ahpd sends of
// them is checked too.
func addExtensions(root map[string]any) error {
	ext, err := extensions.Load()
	if err != nil {
		return err
	}
	defs, _ := root["$defs"].(map[string]any)
	for union, members := range ext.Unions {
		u, ok := defs[union].(map[string]any)
		if !ok {
			continue
		}
		oneOf, _ := u["oneOf"].([]any)
		for _, m := range members {
			def, err := jsonschema.UnmarshalJSON(bytes.NewReader(ext.Defs[m]))
			if err != nil {
				return fmt.Errorf("extension %s: %w", m, err)
			}
			defs[m] = def
			oneOf = append(oneOf, map[string]any{"$ref": "#/$defs/" + m})
		}
		u["oneOf"] = oneOf
	}
	return nil
}

// widenBitsets lets SessionStatus hold any combination of its bits. The
// schema lists the single flags as an enum, but the value is a bitset:
// InProgress|IsArchived (72) is a status a host sends, and bits a newer
// version adds must pass too.
func widenBitsets(root map[string]any) {
	defs, _ := root["$defs"].(map[string]any)
	if status, ok := defs["SessionStatus"].(map[string]any); ok {
		delete(status, "enum")
		status["type"] = "integer"
		status["minimum"] = 0
		status["maximum"] = uint32(1<<32 - 1)
	}
}

func (s *Schemas) schema(def string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[def]; ok {
		return sch, nil
	}
	url, ok := s.home[def]
	if !ok {
		return nil, fmt.Errorf("the AHP schemas define no %q", def)
	}
	sch, err := s.compiler.Compile(url + "#/$defs/" + def)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", def, err)
	}
	s.compiled[def] = sch
	return sch, nil
}

// Has reports whether the schemas define def.
func (s *Schemas) Has(def string) bool {
	_, ok := s.home[def]
	return ok
}

// Validate checks v against the definition def. v may be JSON text
// ([]byte, json.RawMessage) or any value json.Marshal accepts.
func (s *Schemas) Validate(def string, v any) error {
	sch, err := s.schema(def)
	if err != nil {
		return err
	}
	var data []byte
	switch x := v.(type) {
	case []byte:
		data = x
	case json.RawMessage:
		data = x
	default:
		if data, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encoding %T: %w", v, err)
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s does not validate: %s\n%s", def, strings.TrimSpace(err.Error()), data)
	}
	return nil
}

var (
	loadOnce sync.Once
	loaded   *Schemas
	loadErr  error
)

// Default returns the schemas from SchemaDir, loaded once per process.
func Default() (*Schemas, error) {
	loadOnce.Do(func() {
		dir, err := SchemaDir()
		if err != nil {
			loadErr = err
			return
		}
		loaded, loadErr = Load(dir)
	})
	return loaded, loadErr
}

// Validate fails t unless v validates against the definition def of the
// default schemas.
func Validate(t testing.TB, def string, v any) {
	t.Helper()
	s, err := Default()
	if err != nil {
		t.Fatalf("loading AHP schemas: %v", err)
	}
	if err := s.Validate(def, v); err != nil {
		t.Error(err)
	}
}
