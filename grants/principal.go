package grants

import (
	"fmt"
	"strings"
)

// Kind says what sort of party a Principal is.
type Kind uint8

// The kinds of principal. Nobody is the zero value: the principal of a
// host with no users directory, where there is no one to name.
const (
	Nobody Kind = iota
	KindUser
	KindRoot
	KindPlugin
)

// String returns the kind's prefix as it appears in a principal's string
// form, or "nobody".
func (k Kind) String() string {
	switch k {
	case KindUser:
		return "user"
	case KindRoot:
		return "root"
	case KindPlugin:
		return "plugin"
	}
	return "nobody"
}

// Principal is who is asking: a person who presented a personal token
// (user:<id>), a connection that is the host itself or presented the
// deployment's connection token (root:<host>), a plugin acting on its own
// account (plugin:<name>), or nobody (the zero value).
//
// Principals are comparable values; two principals are the same party
// exactly when they are ==.
type Principal struct {
	Kind Kind
	ID   string
}

// UserPrincipal returns user:<id>. It does not check id; Parse does.
func UserPrincipal(id string) Principal { return Principal{Kind: KindUser, ID: id} }

// RootPrincipal returns root:<host>, host being the machine's hostname.
func RootPrincipal(host string) Principal { return Principal{Kind: KindRoot, ID: host} }

// PluginPrincipal returns plugin:<name>.
func PluginPrincipal(name string) Principal { return Principal{Kind: KindPlugin, ID: name} }

// IsZero reports whether p is nobody.
func (p Principal) IsZero() bool { return p == Principal{} }

// String returns "kind:id", or "nobody" for the zero principal.
func (p Principal) String() string {
	if p.IsZero() {
		return "nobody"
	}
	return p.Kind.String() + ":" + p.ID
}

// Owns reports whether owner, a session's recorded owner in the string
// form String returns, names p. Nobody owns nothing, not even a session
// recorded with no owner, so an owner filter on a host with no users
// directory matches no session rather than every one.
func (p Principal) Owns(owner string) bool {
	if p.IsZero() {
		return false
	}
	o, err := Parse(owner)
	return err == nil && o == p
}

// MarshalText returns the string form of p.
func (p Principal) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses text as Parse does.
func (p *Principal) UnmarshalText(text []byte) error {
	q, err := Parse(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Parse reads a principal in the form String writes. "" and "nobody" are
// the zero principal. A user id must be a valid user id (see ValidID); a
// host or plugin name is 1 to 255 letters, digits, '.', '_' or '-'.
func Parse(s string) (Principal, error) {
	if s == "" || s == "nobody" {
		return Principal{}, nil
	}
	kind, id, ok := strings.Cut(s, ":")
	if !ok {
		return Principal{}, fmt.Errorf("principal %s: want user:<id>, root:<host> or plugin:<name>", quote(s))
	}
	switch kind {
	case "user":
		if err := ValidID(id); err != nil {
			return Principal{}, fmt.Errorf("principal %s: %w", quote(s), err)
		}
		return UserPrincipal(id), nil
	case "root", "plugin":
		if !validName(id) {
			return Principal{}, fmt.Errorf("principal %s: a %s name is 1 to 255 letters, digits, '.', '_' or '-'", quote(s), kind)
		}
		if kind == "root" {
			return RootPrincipal(id), nil
		}
		return PluginPrincipal(id), nil
	}
	return Principal{}, fmt.Errorf("principal %s: unknown kind %s, want user, root or plugin", quote(s), quote(kind))
}

// ValidID reports whether id may name a user: 1 to 64 characters, each a
// lower-case ASCII letter, a digit, '.', '_' or '-'.
func ValidID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("user id %s: want 1 to 64 characters", quote(id))
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("user id %s: only a-z, 0-9, '.', '_' and '-' are allowed", quote(id))
		}
	}
	return nil
}

// validName reports whether s may name a host or a plugin.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
