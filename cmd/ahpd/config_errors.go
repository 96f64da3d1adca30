package main

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownField is how the YAML decoder says a key has no field: "line 3:
// field lissten not found in type main.config".
var unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)

// explainConfig rewrites the decoder's unknown-key errors for a person:
// the key as written, the key it likely meant, and the keys allowed at
// that place of the file. Other errors pass unchanged.
func explainConfig(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	types := map[string]reflect.Type{}
	collectTypes(reflect.TypeFor[config](), types)
	lines := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		m := unknownField.FindStringSubmatch(e)
		var t reflect.Type
		if m != nil {
			t = types[m[3]]
		}
		if t == nil {
			lines[i] = e
			continue
		}
		key := m[2]
		if len(key) > 64 {
			key = key[:64] + "…"
		}
		keys := yamlKeys(t)
		msg := fmt.Sprintf("line %s: unknown key %q", m[1], key)
		if near := nearest(m[2], keys); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		lines[i] = msg + "; the keys allowed there are " + strings.Join(keys, ", ")
	}
	return errors.New(strings.Join(lines, "\n"))
}

// collectTypes adds t and every struct type a config file may hold under
// it, by the name the decoder calls each.
func collectTypes(t reflect.Type, into map[string]reflect.Type) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		collectTypes(t.Elem(), into)
		return
	case reflect.Struct:
	default:
		return
	}
	if _, seen := into[t.String()]; seen || t == reflect.TypeFor[yaml.Node]() {
		return
	}
	into[t.String()] = t
	for f := range fieldsOf(t) {
		collectTypes(f.Type, into)
	}
}

// fieldsOf yields the exported fields of a struct the decoder fills.
func fieldsOf(t reflect.Type) func(yield func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && f.Tag.Get("yaml") != "-" && !yield(f) {
				return
			}
		}
	}
}

// yamlKeys are the keys a struct takes in YAML, sorted: its tags' names
// (the lowercased field name without one), inlined structs' among them.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range fieldsOf(t) {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			keys = append(keys, yamlKeys(f.Type)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
	}
	slices.Sort(keys)
	return keys
}

// nearest is the key closest to what was written, when it is close
// enough to be a slip (a third of its letters or fewer differ, case
// aside), else "".
func nearest(written string, keys []string) string {
	best, bestD := "", len(written)/3+1
	for _, k := range keys {
		if d := distance(strings.ToLower(written), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
