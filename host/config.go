package host

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/go-json-experiment/json/jsontext"
)

// resolveConfig returns a session's config schema and values: the
// properties the backend offers, each value the one given when it has the
// property's shape, else the property's default. Values for keys nobody
// offers are dropped. It reports the keys it dropped or replaced.
func (h *Host) resolveConfig(backend plugins.Backend, given protocol.Object, who grants.Principal) (protocol.SessionConfigState, []string) {
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
	if p, ok := h.scopeProperty(who); ok {
		state.Schema.Properties.Set(keyScope, p)
		if v, ok := given[keyScope]; ok && fits(p, v) {
			state.Values[keyScope] = v
		} else {
			state.Values[keyScope] = p.Default
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

const keyScope = "scope"

// scopeProperty is the scope key: offered only when there is a person to
// ask, with their memberships as its values and their primary first.
func (h *Host) scopeProperty(who grants.Principal) (protocol.SessionConfigPropertySchema, bool) {
	dir := h.directory()
	if dir == nil || who.Kind != grants.KindUser {
		return protocol.SessionConfigPropertySchema{}, false
	}
	scopes := dir.Memberships(who)
	if len(scopes) == 0 {
		return protocol.SessionConfigPropertySchema{}, false
	}
	p := protocol.SessionConfigPropertySchema{
		Type:           "string",
		Title:          "Scope",
		Description:    new("The team and project this session's work is charged to."),
		SessionMutable: new(false),
	}
	for _, sc := range scopes {
		v, _ := json.Marshal(sc.String())
		p.Enum = append(p.Enum, v)
		p.EnumLabels = append(p.EnumLabels, sc.String())
	}
	p.Default = p.Enum[0]
	return p, true
}
