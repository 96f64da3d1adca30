package grants

import (
	"fmt"

	"github.com/ahpd/ahpd/protocol"
)

// OnlyOwnerMessage is what disposeSession answers anybody who is neither
// the session's owner nor an administrator.
const OnlyOwnerMessage = "Only the session's owner can delete it."

// Denied is Check's refusal. The host answers it with JSON-RPC error
// -32009 (PermissionDenied) and Message: errors.As finds a
// *protocol.Error in it carrying both.
type Denied struct {
	Principal Principal
	Operation Operation
	Message   string
}

// Error returns the message the client is given.
func (d *Denied) Error() string { return d.Message }

// As makes a *Denied available as the *protocol.Error the host sends.
func (d *Denied) As(target any) bool {
	pe, ok := target.(**protocol.Error)
	if ok {
		*pe = &protocol.Error{Code: protocol.CodePermissionDenied, Message: d.Message}
	}
	return ok
}

func deny(p Principal, op Operation, why string) *Denied {
	msg := fmt.Sprintf("%s may not %s", p, op)
	if why != "" {
		msg += ": " + why
	}
	return &Denied{Principal: p, Operation: op, Message: msg}
}

// Check decides whether p may do op to a session owned by owner (the zero
// Principal for a session with no owner, or when op is not about one
// session) that is shared with the team, and returns nil or a *Denied:
// CheckSession with Target{Owner: owner, Sharing: ShareTeam}.
func (d *Directory) Check(p Principal, op Operation, owner Principal) error {
	return d.CheckSession(p, op, Target{Owner: owner, Sharing: ShareTeam})
}

// CheckSession decides whether p may do op to the session t (the zero
// Target when op is not about one session), and returns nil or a
// *Denied. The host calls it before every handler and for every action a
// client dispatches, with the operation ForCommand or ForAction gave.
//
// The rules, in order:
//   - an Operation that is neither a grant nor a marker is refused to
//     everybody, so a lookup forgotten fails closed;
//   - a nil directory (a host with no users directory) refuses nobody;
//   - root may do everything;
//   - nobody, on a host with users, may do nothing;
//   - a plugin has the member role, and owns the sessions it starts;
//   - a user has the role the directory gives them now (a user removed
//     since they connected may do nothing but None);
//   - session:dispose is the owner's or an administrator's: anybody else
//     whose role grants it gets OnlyOwnerMessage; session:share likewise,
//     with OnlyOwnerShares;
//   - a user who is neither the owner nor an administrator does to an
//     owned session only what its sharing leaves them: nothing when it is
//     private, reading when it is shared for reading.
func (d *Directory) CheckSession(p Principal, op Operation, t Target) error {
	if !op.known() {
		return &Denied{Principal: p, Operation: op, Message: fmt.Sprintf("%s may not %s: not an operation", p, quote(string(op)))}
	}
	if d == nil || p.Kind == KindRoot {
		return nil
	}
	var role Role
	switch p.Kind {
	case KindPlugin:
		role = Member
	case KindUser:
		r, ok := d.role(p.ID)
		switch {
		case ok:
			role = r
		case op == None:
			return nil
		default:
			return deny(p, op, "not in the users directory")
		}
	default:
		return deny(p, op, "not signed in")
	}
	if !role.Allows(op) {
		return deny(p, op, fmt.Sprintf("the %s role does not grant it", role))
	}
	if role == Admin || p == t.Owner {
		return nil
	}
	switch {
	case op == SessionDispose:
		return &Denied{Principal: p, Operation: op, Message: OnlyOwnerMessage}
	case op == SessionShare:
		return &Denied{Principal: p, Operation: op, Message: OnlyOwnerShares}
	case p.Kind == KindUser && op.Group() != "" && !sharingAllows(op, t):
		return notShared(p, op, t)
	}
	return nil
}

// Owner returns who a session p opens belongs to: p itself, or nobody on a
// host with no users directory, which has nobody to name.
func (d *Directory) Owner(p Principal) Principal {
	if d == nil {
		return Principal{}
	}
	return p
}
