// Package protocoltest checks values against the official AHP JSON schemas
// and finds the protocol's conformance vectors, for tests anywhere in ahpd.
//
// The released 1.0.0 definitions are read from $AHP_SCHEMA_DIR (by default
// ../shared/ahp/schema-1.0 beside the module) and the upstream 0.8 vectors
// from $AHP_TEST_CASES (../shared/ahp/test-cases). Neither is copied into
// the project.
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
)

// SchemaDir returns the directory holding the AHP 1.0.0 definitions:
// errors.schema.json, which repeats all but a dozen of them, and
// extra-defs.json with the rest.
func SchemaDir() (string, error) {
	return sharedDir("AHP_SCHEMA_DIR", "schema-1.0")
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
	url      string
	defs     map[string]any

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// Load reads the definitions in dir.
func Load(dir string) (*Schemas, error) {
	main, err := readJSON(filepath.Join(dir, "errors.schema.json"))
	if err != nil {
		return nil, err
	}
	extra, err := readJSON(filepath.Join(dir, "extra-defs.json"))
	if err != nil {
		return nil, err
	}
	defs, _ := main["$defs"].(map[string]any)
	if defs == nil {
		return nil, fmt.Errorf("%s: no $defs", dir)
	}
	for name, def := range extra {
		if _, dup := defs[name]; dup {
			return nil, fmt.Errorf("extra-defs.json redefines %s", name)
		}
		defs[name] = def
	}
	widenBitsets(main)
	url, _ := main["$id"].(string)
	if url == "" {
		url = "file://" + filepath.Join(dir, "errors.schema.json")
	}
	s := &Schemas{compiler: jsonschema.NewCompiler(), url: url, defs: defs, compiled: map[string]*jsonschema.Schema{}}
	if err := s.compiler.AddResource(url, main); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return s, nil
}

func readJSON(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return m, nil
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
	if _, ok := s.defs[def]; !ok {
		return nil, fmt.Errorf("the AHP schemas define no %q", def)
	}
	sch, err := s.compiler.Compile(s.url + "#/$defs/" + def)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", def, err)
	}
	s.compiled[def] = sch
	return sch, nil
}

// Has reports whether the schemas define def.
func (s *Schemas) Has(def string) bool {
	_, ok := s.defs[def]
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
