package session

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// Fits reports whether a value has the shape a property asks for.
func Fits(p protocol.SessionConfigPropertySchema, v jsontext.Value) bool {
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
		if IsHostKey(k) {
			hv, ok := HostValue(k, p, v)
			if !ok {
				return nil, "config key " + k + " does not take that value: " + ValueProblem(k, p, v)
			}
			if IsPermissionKey(k) {
				taken[k] = hv
			}
		} else if !Fits(p, v) {
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

const KeyScope = "scope"
