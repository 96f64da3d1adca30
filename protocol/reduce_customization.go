package protocol

import (
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// Customizations are a list of containers (plugins, directories) with
// children, and MCP servers that stand alone or sit in a container. An id
// names one entry anywhere in that tree: a top-level entry first, else the
// first child that has it.

func customizationID(c Customization) string {
	switch c := c.(type) {
	case *PluginCustomization:
		return c.ID
	case *DirectoryCustomization:
		return c.ID
	case *MCPServerCustomization:
		return c.ID
	case *Unknown:
		return c.member("id")
	}
	return ""
}

func childID(c ChildCustomization) string {
	switch c := c.(type) {
	case *AgentCustomization:
		return c.ID
	case *SkillCustomization:
		return c.ID
	case *PromptCustomization:
		return c.ID
	case *RuleCustomization:
		return c.ID
	case *HookCustomization:
		return c.ID
	case *MCPServerCustomization:
		return c.ID
	case *Unknown:
		return c.member("id")
	}
	return ""
}

// children returns a container's children; MCP servers have none.
func children(c Customization) ([]ChildCustomization, bool) {
	switch c := c.(type) {
	case *PluginCustomization:
		return c.Children, true
	case *DirectoryCustomization:
		return c.Children, true
	}
	return nil, false
}

func withChildren(c Customization, kids []ChildCustomization) Customization {
	switch c := c.(type) {
	case *PluginCustomization:
		next := *c
		next.Children = kids
		return &next
	case *DirectoryCustomization:
		next := *c
		next.Children = kids
		return &next
	}
	return c
}

func setEnabled[T ~*E, E any](c T, set func(*E)) T {
	next := *c
	set(&next)
	return T(&next)
}

// Enabled is the effective value of a list of enablement decisions: the
// most specific decision (session, then workspace, then global) wins, and
// no decision at all means enabled.
func Enabled(list []CustomizationEnablement) bool {
	best, rank := true, 0
	for _, e := range list {
		var on bool
		var r int
		switch e := e.(type) {
		case *CustomizationEnablementSession:
			on, r = e.Enabled, 3
		case *CustomizationEnablementWorkspace:
			on, r = e.Enabled, 2
		case *CustomizationEnablementGlobal:
			on, r = e.Enabled, 1
		default:
			continue
		}
		if r > rank {
			best, rank = on, r
		}
	}
	return best
}

// toggled applies a customizationToggled's decisions to one entry: plugins
// and MCP servers keep the decisions themselves, other entries the
// effective value.
func toggled(c Customization, list []CustomizationEnablement) Customization {
	on := Enabled(list)
	if len(list) == 0 {
		list = nil // no decision at all: the member goes
	}
	switch c := c.(type) {
	case *PluginCustomization:
		return setEnabled(c, func(n *PluginCustomization) { n.Enablement = list })
	case *DirectoryCustomization:
		return setEnabled(c, func(n *DirectoryCustomization) { n.Enabled = on })
	case *MCPServerCustomization:
		return setEnabled(c, func(n *MCPServerCustomization) { n.Enablement = list })
	case *Unknown:
		return c.with("enabled", on)
	}
	return c
}

func toggledChild(c ChildCustomization, list []CustomizationEnablement) ChildCustomization {
	on := Enabled(list)
	if len(list) == 0 {
		list = nil
	}
	switch c := c.(type) {
	case *AgentCustomization:
		return setEnabled(c, func(n *AgentCustomization) { n.Enabled = &on })
	case *SkillCustomization:
		return setEnabled(c, func(n *SkillCustomization) { n.Enabled = &on })
	case *PromptCustomization:
		return setEnabled(c, func(n *PromptCustomization) { n.Enabled = &on })
	case *RuleCustomization:
		return setEnabled(c, func(n *RuleCustomization) { n.Enabled = &on })
	case *HookCustomization:
		return setEnabled(c, func(n *HookCustomization) { n.Enabled = &on })
	case *MCPServerCustomization:
		return setEnabled(c, func(n *MCPServerCustomization) { n.Enablement = list })
	case *Unknown:
		return c.with("enabled", on)
	}
	return c
}

func toggleCustomization(s *SessionState, id string, list []CustomizationEnablement) *SessionState {
	if s.Customizations == nil {
		return s
	}
	next := *s
	if i := slices.IndexFunc(s.Customizations, func(c Customization) bool { return customizationID(c) == id }); i >= 0 {
		next.Customizations = slices.Clone(s.Customizations)
		next.Customizations[i] = toggled(s.Customizations[i], list)
		return &next
	}
	for i, c := range s.Customizations {
		kids, ok := children(c)
		j := slices.IndexFunc(kids, func(k ChildCustomization) bool { return childID(k) == id })
		if !ok || j < 0 {
			continue
		}
		kids = slices.Clone(kids)
		kids[j] = toggledChild(kids[j], list)
		next.Customizations = slices.Clone(s.Customizations)
		next.Customizations[i] = withChildren(c, kids)
		return &next
	}
	return s
}

func removeCustomization(s *SessionState, id string) *SessionState {
	if s.Customizations == nil {
		return s
	}
	next := *s
	if i := slices.IndexFunc(s.Customizations, func(c Customization) bool { return customizationID(c) == id }); i >= 0 {
		next.Customizations = without(s.Customizations, i)
		return &next
	}
	changed := false
	list := slices.Clone(s.Customizations)
	for i, c := range list {
		kids, ok := children(c)
		j := slices.IndexFunc(kids, func(k ChildCustomization) bool { return childID(k) == id })
		if !ok || j < 0 {
			continue
		}
		list[i] = withChildren(c, without(kids, j))
		changed = true
	}
	if !changed {
		return s
	}
	next.Customizations = list
	return &next
}

// updateMCPServer applies update to a copy of the MCP server named id, at
// the top level or inside a container. Any other entry with that id is left
// alone.
func updateMCPServer(s *SessionState, id string, update func(*MCPServerCustomization)) *SessionState {
	return updateMCPServerIf(s, id, func(m *MCPServerCustomization) bool {
		update(m)
		return true
	})
}

// updateMCPServerIf is updateMCPServer for updates that may decline, by
// returning false, to change the server they are given.
func updateMCPServerIf(s *SessionState, id string, update func(*MCPServerCustomization) bool) *SessionState {
	if s.Customizations == nil {
		return s
	}
	next := *s
	if i := slices.IndexFunc(s.Customizations, func(c Customization) bool { return customizationID(c) == id }); i >= 0 {
		m, ok := s.Customizations[i].(*MCPServerCustomization)
		if !ok {
			return s
		}
		updated := *m
		if !update(&updated) {
			return s
		}
		next.Customizations = slices.Clone(s.Customizations)
		next.Customizations[i] = &updated
		return &next
	}
	changed := false
	list := slices.Clone(s.Customizations)
	for i, c := range list {
		kids, ok := children(c)
		j := slices.IndexFunc(kids, func(k ChildCustomization) bool { return childID(k) == id })
		if !ok || j < 0 {
			continue
		}
		m, ok := kids[j].(*MCPServerCustomization)
		if !ok {
			continue
		}
		updated := *m
		if !update(&updated) {
			continue
		}
		kids = slices.Clone(kids)
		kids[j] = &updated
		list[i] = withChildren(c, kids)
		changed = true
	}
	if !changed {
		return s
	}
	next.Customizations = list
	return &next
}

// member returns a string member of an unknown variant, or "".
func (u *Unknown) member(name string) string {
	var o Object
	if err := o.UnmarshalJSON(u.Raw); err != nil {
		return ""
	}
	var s string
	if err := withDecoder(o[name], func(d *decoder) (err error) {
		s, err = d.string()
		return err
	}); err != nil {
		return ""
	}
	return s
}

// with returns a copy of an unknown variant with a boolean member set, so
// an action that sets a member every variant has reaches variants this
// version does not define too.
func (u *Unknown) with(name string, value bool) *Unknown {
	var o Object
	if err := o.UnmarshalJSON(u.Raw); err != nil {
		return u
	}
	o[name] = jsontext.Value("false")
	if value {
		o[name] = jsontext.Value("true")
	}
	raw, err := o.MarshalJSON()
	if err != nil {
		return u
	}
	return &Unknown{Kind: u.Kind, Raw: raw}
}
