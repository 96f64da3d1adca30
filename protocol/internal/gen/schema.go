package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ahpd/ahpd/protocol/internal/extensions"
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

	// propOrder keeps the properties in schema order, so generated structs
	// read like the schema.
	propOrder []string
}

var knownKeywords = map[string]bool{
	"$ref": true, "type": true, "const": true, "enum": true, "oneOf": true,
	"properties": true, "required": true, "items": true,
	"additionalProperties": true, "description": true,
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

// schemaFile is one of the five AHP schema files.
type schemaFile struct {
	name string // "state", "actions", ...
	defs map[string]*node
	raw  map[string]json.RawMessage
}

// schemaFiles lists the files in the order that decides a definition's home:
// every file repeats the definitions it references, and a definition is
// emitted once, into the Go file of the first schema file that has it.
var schemaFiles = []string{"state", "actions", "commands", "notifications", "errors"}

func loadSchemas(dir string) ([]*schemaFile, error) {
	var out []*schemaFile
	for _, name := range schemaFiles {
		path := filepath.Join(dir, name+".schema.json")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		f := &schemaFile{name: name, defs: map[string]*node{}, raw: doc.Defs}
		for k, raw := range doc.Defs {
			var n node
			if err := json.Unmarshal(raw, &n); err != nil {
				return nil, fmt.Errorf("%s: $defs.%s: %w", path, k, err)
			}
			f.defs[k] = &n
		}
		out = append(out, f)
	}
	return out, addExtensions(out)
}

// addExtensions adds the definitions that came after the schema files to
// the actions file, and their references to the unions they belong to.
func addExtensions(files []*schemaFile) error {
	ext, err := extensions.Load()
	if err != nil {
		return fmt.Errorf("extensions: %w", err)
	}
	var actions *schemaFile
	for _, f := range files {
		if f.name == "actions" {
			actions = f
		}
	}
	for name, raw := range ext.Defs {
		var n node
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("extensions: $defs.%s: %w", name, err)
		}
		actions.defs[name] = &n
	}
	for union, members := range ext.Unions {
		for _, f := range files {
			u, ok := f.defs[union]
			if !ok {
				continue
			}
			for _, m := range members {
				u.OneOf = append(u.OneOf, &node{Ref: "#/$defs/" + m})
				if f != actions {
					f.defs[m] = actions.defs[m]
				}
			}
		}
	}
	return nil
}
