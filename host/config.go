package host

import (
	"encoding/json"
	"slices"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/session"
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
			if session.IsHostKey(p.Key) {
				v, ok = session.HostValue(p.Key, p.Schema, v)
			} else {
				ok = session.Fits(p.Schema, v)
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
			if !session.IsHostKey(p.Key) { // the host's keys are the host's
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
		take(plugins.Property{Key: session.KeyScope, Schema: p})
	}
	if p, ok := h.sharingProperty(who); ok {
		take(plugins.Property{Key: session.KeySharing, Schema: p})
	}
	for k := range given {
		if _, ok := state.Schema.Properties.Get(k); !ok {
			ignored = append(ignored, k)
		}
	}
	slices.Sort(ignored)
	return state, ignored
}

// sharingProperty is the sharing key: offered to people on a host with
// users, private unless they choose otherwise; the owner may change it
// while the session runs.
func (h *Host) sharingProperty(who grants.Principal) (protocol.SessionConfigPropertySchema, bool) {
	if h.directory() == nil || who.Kind != grants.KindUser {
		return protocol.SessionConfigPropertySchema{}, false
	}
	p := protocol.SessionConfigPropertySchema{
		Type:           "string",
		Title:          "Sharing",
		Description:    new("Who besides you and the administrators may use this session: nobody, read it, or work in it."),
		SessionMutable: new(true),
	}
	labels := map[grants.Sharing]string{grants.SharePrivate: "Only me", grants.ShareRead: "Others may read", grants.ShareTeam: "Others may work in it"}
	for _, sh := range grants.Sharings {
		v, _ := json.Marshal(string(sh))
		p.Enum = append(p.Enum, v)
		p.EnumLabels = append(p.EnumLabels, labels[sh])
	}
	p.Default = p.Enum[0]
	return p, true
}

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
