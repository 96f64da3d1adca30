package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// node is one JSON Schema node, limited to the keywords the AHP schemas use.
// Any other keyword makes loading fail, so a schema that grows a construct
// the generator does not understand is noticed rather than mistranslated.
type node struct {
	Ref         string           `json:"$ref"`
	Type        string           `json:"type"`
	Const       json.RawMessage  `json:"const"`
	Enum        []any            `json:"enum"`
	OneOf       []*node          `json:"oneOf"`
	Properties  map[string]*node `json:"properties"`
	Required    []string         `json:"required"`
	Items       *node            `json:"items"`
	AddlProps   *node            `json:"additionalProperties"`
	Description string           `json:"description"`

	// Constraints that leave the Go type as it is: the tests' schema
	// validation checks them, the decoder does not.
	Minimum     json.RawMessage `json:"minimum"`
	AllOf       []*node         `json:"allOf"`
	Contains    *node           `json:"contains"`
	MinContains json.RawMessage `json:"minContains"`
	MaxContains json.RawMessage `json:"maxContains"`

	// propOrder keeps the properties in schema order, so generated structs
	// read like the schema.
	propOrder []string
}

var knownKeywords = map[string]bool{
	"$ref": true, "type": true, "const": true, "enum": true, "oneOf": true,
	"properties": true, "required": true, "items": true,
	"additionalProperties": true, "description": true,
	"minimum": true, "allOf": true, "contains": true, "minContains": true, "maxContains": true,
}

func (n *node) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	for k := range keys {
		if !knownKeywords[k] {
			return fmt.Errorf("unsupported schema keyword %q", k)
		}
	}
	type plain node
	if err := json.Unmarshal(b, (*plain)(n)); err != nil {
		return err
	}
	for _, c := range n.AllOf {
		if c.Contains == nil || c.Type != "" || c.Ref != "" || c.Properties != nil || c.OneOf != nil {
			return fmt.Errorf("allOf holds more than array constraints")
		}
	}
	if raw, ok := keys["properties"]; ok {
		order, err := objectKeys(raw)
		if err != nil {
			return err
		}
		n.propOrder = order
	}
	return nil
}

// objectKeys returns the member names of a JSON object in document order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func (n *node) refName() string {
	return strings.TrimPrefix(n.Ref, "#/$defs/")
}

func (n *node) isRequired(prop string) bool {
	for _, r := range n.Required {
		if r == prop {
			return true
		}
	}
	return false
}

// constString returns the node's const value when it is a string.
func (n *node) constString() (string, bool) {
	if n.Const == nil {
		return "", false
	}
	var s string
	if err := json.Unmarshal(n.Const, &s); err != nil {
		return "", false
	}
	return s, true
}

// stringValues returns the fixed string values a node allows: a const, a
// string enum, or a oneOf of string consts.
func (n *node) stringValues() ([]string, bool) {
	if s, ok := n.constString(); ok {
		return []string{s}, true
	}
	if len(n.Enum) > 0 {
		var out []string
		for _, v := range n.Enum {
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	if len(n.OneOf) > 0 {
		var out []string
		for _, o := range n.OneOf {
			s, ok := o.constString()
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// The released definitions come as two files: errors.schema.json, which
// like every upstream schema file repeats every definition it references
// (all but a dozen), and extra-defs.json with the ones that live only in the
// other upstream files.
const (
	mainFile  = "errors.schema.json"
	extraFile = "extra-defs.json"
)

// goFiles lists the Go files the types are split into, in the order that
// decides a definition's home: a definition goes to the first file whose
// roots reach it.
var goFiles = []string{"state", "actions", "commands", "notifications", "errors"}

// loadSchemas reads every definition in dir.
func loadSchemas(dir string) (map[string]*node, error) {
	defs := map[string]*node{}
	read := func(name string, inDefs bool) error {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		raw := map[string]json.RawMessage{}
		if inDefs {
			var doc struct {
				Defs map[string]json.RawMessage `json:"$defs"`
			}
			err = json.Unmarshal(data, &doc)
			raw = doc.Defs
		} else {
			err = json.Unmarshal(data, &raw)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for k, r := range raw {
			if _, dup := defs[k]; dup {
				return fmt.Errorf("%s: $defs.%s is defined twice", path, k)
			}
			var n node
			if err := json.Unmarshal(r, &n); err != nil {
				return fmt.Errorf("%s: $defs.%s: %w", path, k, err)
			}
			defs[k] = &n
		}
		return nil
	}
	if err := read(mainFile, true); err != nil {
		return nil, err
	}
	if err := read(extraFile, false); err != nil {
		return nil, err
	}
	return defs, nil
}

// homes assigns each definition the Go file it is emitted into: the first
// of goFiles whose roots (config.go) reach it through references.
func homes(defs map[string]*node) (map[string]string, error) {
	home := map[string]string{}
	for _, file := range goFiles {
		var stack []string
		for name := range defs {
			if rootOf(name, defs[name]) == file {
				stack = append(stack, name)
			}
		}
		for len(stack) > 0 {
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if _, done := home[name]; done {
				continue
			}
			n, ok := defs[name]
			if !ok {
				return nil, fmt.Errorf("a reference to %q, which is not defined", name)
			}
			home[name] = file
			stack = append(stack, n.refs()...)
		}
	}
	return home, nil
}

// refs returns the names of the definitions n refers to.
func (n *node) refs() []string {
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if n.Ref != "" && n.refName() != "" {
			out = append(out, n.refName())
		}
		for _, o := range n.OneOf {
			walk(o)
		}
		for _, p := range n.Properties {
			walk(p)
		}
		walk(n.Items)
		walk(n.AddlProps)
	}
	walk(n)
	return out
}
