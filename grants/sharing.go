package grants

import "fmt"

// Sharing is who besides its owner may use a session. Administrators and
// root use every session whatever its sharing; the others do what their
// role grants, within what the sharing leaves them.
type Sharing string

const (
	// SharePrivate keeps a session its owner's: nobody else reads it,
	// lists it, or works in it. What sessions people make are, unless
	// they choose otherwise.
	SharePrivate Sharing = "private"
	// ShareRead lets anybody whose role reads see the session; only its
	// owner works in it.
	ShareRead Sharing = "read"
	// ShareTeam lets anybody do what their role grants in the session.
	// A session with no sharing recorded (root's, a plugin's, one made
	// before sharing was) is shared so.
	ShareTeam Sharing = "team"
)

// Sharings are the values a session's sharing may take, the default for
// people first.
var Sharings = []Sharing{SharePrivate, ShareRead, ShareTeam}

// ParseSharing reads a session's recorded sharing: "" is ShareTeam.
func ParseSharing(s string) (Sharing, error) {
	switch Sharing(s) {
	case "", ShareTeam:
		return ShareTeam, nil
	case SharePrivate, ShareRead:
		return Sharing(s), nil
	}
	return "", fmt.Errorf("sharing %s is not one of private, read, team", quote(s))
}

// Target is the session an operation is about: its owner (the zero
// Principal for none) and its sharing. The zero Target is no session, or
// one nobody owns, which its sharing does not restrict.
type Target struct {
	Owner   Principal
	Sharing Sharing
}

// Session is the Target of a session owned by owner, shared so ("" is
// ShareTeam, as ParseSharing reads it; anything unreadable is private).
func Session(owner Principal, sharing string) Target {
	sh, err := ParseSharing(sharing)
	if err != nil {
		sh = SharePrivate
	}
	return Target{Owner: owner, Sharing: sh}
}

// notShared is the refusal of anybody who may not use a session because
// it is not shared with them.
func notShared(p Principal, op Operation, t Target) *Denied {
	switch t.Sharing {
	case ShareRead:
		return deny(p, op, fmt.Sprintf("the session is %s's, shared for reading only", t.Owner))
	default:
		return deny(p, op, fmt.Sprintf("the session is %s's and not shared", t.Owner))
	}
}

// OnlyOwnerShares is what changing a session's sharing answers anybody
// who is neither its owner nor an administrator.
const OnlyOwnerShares = "Only the session's owner can change who it is shared with."

// SeesEverySession reports whether p reads every session whatever its
// sharing: on a host with no users directory everybody does; else root
// and administrators.
func (d *Directory) SeesEverySession(p Principal) bool {
	if d == nil || p.Kind == KindRoot {
		return true
	}
	if p.Kind != KindUser {
		return false
	}
	r, ok := d.role(p.ID)
	return ok && r == Admin
}

// sharingAllows reports whether a principal with role, not t's owner,
// may do op to t by its sharing alone.
func sharingAllows(op Operation, t Target) bool {
	if t.Owner.IsZero() {
		return true // nobody's: nothing to keep from anybody
	}
	switch t.Sharing {
	case SharePrivate:
		return false
	case ShareRead:
		return op.Group() == GroupRead
	}
	return true
}
