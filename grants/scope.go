package grants

import (
	"fmt"
	"strings"
)

// Scope is the team and project a session's work is charged to. The zero
// Scope charges nothing: the work of a host with no users directory, of a
// root connection or of a plugin is nobody's to charge.
type Scope struct {
	Team    string
	Project string
}

// IsZero reports whether s charges nothing.
func (s Scope) IsZero() bool { return s == Scope{} }

// String returns "team/project", or "" for the zero Scope.
func (s Scope) String() string {
	if s.IsZero() {
		return ""
	}
	return s.Team + "/" + s.Project
}

// ParseScope reads "team/project". "" is the zero Scope.
func ParseScope(s string) (Scope, error) {
	if s == "" {
		return Scope{}, nil
	}
	team, project, ok := strings.Cut(s, "/")
	if !ok {
		return Scope{}, fmt.Errorf("scope %s: want team/project", quote(s))
	}
	if err := validScopeName("team", team); err != nil {
		return Scope{}, fmt.Errorf("scope %s: %w", quote(s), err)
	}
	if err := validScopeName("project", project); err != nil {
		return Scope{}, fmt.Errorf("scope %s: %w", quote(s), err)
	}
	return Scope{Team: team, Project: project}, nil
}

// Scope returns what work p starts is charged to. requested is the
// session's scope config value, "team/project" or empty.
//
// A user's requested scope must be one of their memberships; with none
// requested it is their primary membership. A user with no membership, or
// with none or several marked primary, has no one place to charge work to
// unless they name one, and Scope says so. Root, plugins and every
// principal of a host with no users directory get the zero Scope and no
// error, whatever they requested: their work is charged to nobody rather
// than to whoever sends its next turn.
func (d *Directory) Scope(p Principal, requested string) (Scope, error) {
	if d == nil || p.Kind != KindUser {
		return Scope{}, nil
	}
	u, ok := d.Lookup(p.ID)
	if !ok {
		return Scope{}, fmt.Errorf("%s is not in the users directory, so there is nothing to charge the work to", p)
	}
	if requested != "" {
		want, err := ParseScope(requested)
		if err != nil {
			return Scope{}, err
		}
		for _, m := range u.Memberships {
			if m.Scope() == want {
				return want, nil
			}
		}
		return Scope{}, fmt.Errorf("%s is not a member of %s: choose one of their memberships", p, want)
	}
	var primary []Scope
	for _, m := range u.Memberships {
		if m.Primary {
			primary = append(primary, m.Scope())
		}
	}
	switch {
	case len(u.Memberships) == 0:
		return Scope{}, fmt.Errorf("%s belongs to no team or project, so there is nothing to charge the work to", p)
	case len(primary) == 0:
		return Scope{}, fmt.Errorf("%s has no primary membership: name a scope (team/project) or mark one membership primary", p)
	case len(primary) > 1:
		return Scope{}, fmt.Errorf("%s has %d primary memberships (%s): name a scope (team/project) or keep one primary", p, len(primary), joinScopes(primary))
	}
	return primary[0], nil
}

// Memberships returns the scopes p may charge work to, primary first, for
// completing the scope config key. It is empty for anybody but a user.
func (d *Directory) Memberships(p Principal) []Scope {
	if d == nil || p.Kind != KindUser {
		return nil
	}
	u, ok := d.Lookup(p.ID)
	if !ok {
		return nil
	}
	var first, rest []Scope
	for _, m := range u.Memberships {
		if m.Primary {
			first = append(first, m.Scope())
		} else {
			rest = append(rest, m.Scope())
		}
	}
	return append(first, rest...)
}

func joinScopes(ss []Scope) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", ")
}
