package host

import (
	"bytes"
	"slices"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/go-json-experiment/json/jsontext"
)

// resolveConfig returns a session's config schema and values: the
// properties the backend offers, each value the one given when it has the
// property's shape, else the property's default. Values for keys nobody
// offers are dropped. It reports the keys it dropped or replaced.
func (h *Host) resolveConfig(backend plugins.Backend, given protocol.Object) (protocol.SessionConfigState, []string) {
	state := protocol.SessionConfigState{
		Schema: protocol.SessionConfigSchema{Properties: protocol.NewMap[protocol.SessionConfigPropertySchema]()},
		Values: protocol.Object{},
	}
	var props []plugins.Property
	if backend != nil {
		props = backend.ConfigProperties()
	}
	var ignored []string
	for _, p := range props {
		state.Schema.Properties.Set(p.Key, p.Schema)
		v, ok := given[p.Key]
		switch {
		case ok && fits(p.Schema, v):
			state.Values[p.Key] = v
		case p.Schema.Default != nil:
			state.Values[p.Key] = p.Schema.Default
			if ok {
				ignored = append(ignored, p.Key)
			}
		}
	}
	for k := range given {
		if _, ok := state.Schema.Properties.Get(k); !ok {
			ignored = append(ignored, k)
		}
	}
	slices.Sort(ignored)
	return state, ignored
}

// fits reports whether a value has the shape a property asks for.
func fits(p protocol.SessionConfigPropertySchema, v jsontext.Value) bool {
	if !v.IsValid() {
		return false
	}
	kind := jsontext.Value(bytes.TrimSpace(v)).Kind()
	switch p.Type {
	case "string":
		if kind != '"' {
			return false
		}
	case "number":
		if kind != '0' {
			return false
		}
	case "boolean":
		if kind != 't' && kind != 'f' {
			return false
		}
	case "array":
		if kind != '[' {
			return false
		}
	case "object":
		if kind != '{' {
			return false
		}
	}
	if len(p.Enum) > 0 && (p.EnumDynamic == nil || !*p.EnumDynamic) {
		for _, e := range p.Enum {
			if bytes.Equal(bytes.TrimSpace(e), bytes.TrimSpace(v)) {
				return true
			}
		}
		return false
	}
	return true
}

// configChange checks a client's session/configChanged against the
// session's schema: only keys the schema has, in their shape, and only
// those a running session may change.
func configChange(state *protocol.SessionConfigState, change protocol.Object) string {
	if state == nil {
		return "the session has no config"
	}
	for k, v := range change {
		p, ok := state.Schema.Properties.Get(k)
		if !ok {
			return "unknown config key " + k
		}
		if p.SessionMutable == nil || !*p.SessionMutable {
			return "config key " + k + " is fixed once the session has started"
		}
		if !fits(p, v) {
			return "config key " + k + " does not take that value"
		}
	}
	return ""
}
