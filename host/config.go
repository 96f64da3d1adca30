package host

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// resolveConfig returns a session's config schema and values: isolation,
// the properties the backend offers, the rest of the host's own keys for
// the folder the session is made in, and scope; each value the one given
// when it has the property's shape, else the property's default. Values
// for keys nobody offers are dropped. It reports the keys it dropped or
// replaced.
func (h *Host) resolveConfig(backend plugins.Backend, given protocol.Object, who grants.Principal, folder string) (protocol.SessionConfigState, []string) {
	state := protocol.SessionConfigState{
		Schema: protocol.SessionConfigSchema{Properties: protocol.NewMap[protocol.SessionConfigPropertySchema]()},
		Values: protocol.Object{},
	}
	var ignored []string
	take := func(p plugins.Property) {
		state.Schema.Properties.Set(p.Key, p.Schema)
		v, ok := given[p.Key]
		if ok {
			if isHostKey(p.Key) {
				v, ok = hostValue(p.Key, p.Schema, v)
			} else {
				ok = fits(p.Schema, v)
			}
			if ok {
				state.Values[p.Key] = v
				return
			}
			ignored = append(ignored, p.Key)
			if bad, ok := h.badValue(p.Key); ok {
				state.Values[p.Key] = bad
				return
			}
		}
		if p.Schema.Default != nil {
			state.Values[p.Key] = p.Schema.Default
		}
	}
	first, rest := isolationProperties(folder, given)
	take(first)
	if backend != nil {
		for _, p := range backend.ConfigProperties() {
			if !isHostKey(p.Key) { // the host's keys are the host's
				take(p)
			}
		}
	}
	for _, p := range h.permissionProperties() {
		take(p)
	}
	for _, p := range rest {
		take(p)
	}
	if p, ok := h.scopeProperty(who); ok {
		take(plugins.Property{Key: keyScope, Schema: p})
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
// session's schema: only keys the schema has, in their shape, and, once
// the session has started, only those a running session may change. A
// replacement keeps the fixed keys it leaves out; it returns the config to
// apply.
func configChange(state *protocol.SessionConfigState, a *protocol.SessionConfigChangedAction, started bool) (protocol.Object, string) {
	if state == nil {
		return nil, "the session has no config"
	}
	replace := a.Replace != nil && *a.Replace
	// The values as the session keeps them: a host key's in its own form
	// (autoApprove true as "allow", permissions checked and trimmed).
	taken := make(protocol.Object, len(a.Config))
	for k, v := range a.Config {
		p, ok := state.Schema.Properties.Get(k)
		if !ok {
			return nil, "unknown config key " + protocol.Quote(k) + "; the session's keys are " + strings.Join(state.Schema.Properties.Keys(), ", ")
		}
		fixed := p.SessionMutable == nil || !*p.SessionMutable
		if fixed && started && !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(state.Values[k])) {
			return nil, "config key " + k + " is fixed once the session has started"
		}
		taken[k] = v
		if isHostKey(k) {
			hv, ok := hostValue(k, p, v)
			if !ok {
				return nil, "config key " + k + " does not take that value: " + valueProblem(k, p, v)
			}
			if isPermissionKey(k) {
				taken[k] = hv
			}
		} else if !fits(p, v) {
			return nil, "config key " + k + " does not take that value"
		}
	}
	if !replace || !started {
		return taken, ""
	}
	merged := make(protocol.Object, len(taken))
	for k, v := range taken {
		merged[k] = v
	}
	for k, p := range state.Schema.Properties.All() {
		if _, given := merged[k]; !given && (p.SessionMutable == nil || !*p.SessionMutable) {
			if v, ok := state.Values[k]; ok {
				merged[k] = v
			}
		}
	}
	return merged, ""
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
