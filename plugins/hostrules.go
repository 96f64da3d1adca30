package plugins

import (
	"maps"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// ConfigHostRules is the config key the host hands its own rules to an
// agent under, beside the session's values: an administrator's settings
// that lie over every session (VS Code's approval settings, mirrored in
// root config). It is never a session's key: the host sets it, or takes
// it away, each time it hands an agent its config, so a client cannot put
// it there.
const ConfigHostRules = "ahpd.hostRules"

// HostRules are the host's permissions, laid over each session's own:
// its deny rules refuse in every session, its allow rules and AllowAll
// run what the session leaves open, and its terminal rules approve the
// commands they match. They never make a session ask for something its
// own permissions run.
type HostRules struct {
	// Allow and Deny are rules as a session's permissions take them.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// AllowAll runs every call no deny rule refuses.
	AllowAll bool `json:"allowAll,omitempty"`
	// Terminal holds terminal rules (ParseTerminalRules), checked.
	Terminal jsontext.Value `json:"terminal,omitempty"`
}

// IsZero reports whether the rules decide nothing.
func (r HostRules) IsZero() bool {
	return len(r.Allow) == 0 && len(r.Deny) == 0 && !r.AllowAll && len(r.Terminal) == 0
}

// WithHostRules returns config with the host's rules r in it (none, for
// nil or empty rules), leaving config itself as it was.
func WithHostRules(config protocol.Object, r *HostRules) protocol.Object {
	_, had := config[ConfigHostRules]
	if r == nil || r.IsZero() {
		if !had {
			return config
		}
		out := maps.Clone(config)
		delete(out, ConfigHostRules)
		return out
	}
	data, err := json.Marshal(r)
	if err != nil {
		return config
	}
	out := make(protocol.Object, len(config)+1)
	maps.Copy(out, config)
	out[ConfigHostRules] = data
	return out
}

// hostLayer is the host's rules as a policy checks them.
type hostLayer struct {
	allow, deny []rule
	allowAll    bool
	terminal    []TerminalRule
	// bad: a rule could not be read; the layer then grants nothing.
	bad bool
}

// lastLayer is the host layer read last, by the value it was read from:
// every agent of every session is handed the same rules, and a policy is
// made for each permission prompt, so the rules (up to 1,024 expressions)
// are read once per change rather than once per prompt.
var lastLayer atomic.Pointer[struct {
	from  string
	layer hostLayer
}]

// hostLayerOf reads the host's rules from an agent's config values.
func hostLayerOf(config protocol.Object) hostLayer {
	v, ok := config[ConfigHostRules]
	if !ok {
		return hostLayer{}
	}
	if last := lastLayer.Load(); last != nil && last.from == string(v) {
		return last.layer
	}
	l := readHostLayer(v)
	lastLayer.Store(&struct {
		from  string
		layer hostLayer
	}{string(v), l})
	return l
}

// readHostLayer reads a ConfigHostRules value. The layer it returns is
// never modified after, so it may be shared.
func readHostLayer(v jsontext.Value) hostLayer {
	var r HostRules
	if err := json.Unmarshal(v, &r); err != nil {
		return hostLayer{bad: true}
	}
	var l hostLayer
	for _, s := range r.Allow {
		if ru, err := parseRule(s); err == nil {
			ru.from = "host "
			l.allow = append(l.allow, ru)
		}
	}
	for _, s := range r.Deny {
		ru, err := parseRule(s)
		if err != nil {
			l.bad = true
			continue
		}
		ru.from = "host "
		l.deny = append(l.deny, ru)
	}
	l.allowAll = r.AllowAll
	if len(r.Terminal) > 0 {
		t, err := ParseTerminalRules(r.Terminal)
		if err != nil {
			l.bad = true
		}
		l.terminal = t
	}
	if l.bad {
		// A host deny rule lost could be the one that matters.
		l.allow, l.allowAll, l.terminal = nil, false, nil
	}
	return l
}
