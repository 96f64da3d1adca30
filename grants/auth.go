package grants

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
)

// Source gives the users directory as it is now. A nil result is a host
// with no users directory. *Live and *Directory are Sources.
type Source interface {
	Current() *Directory
}

// Notifier is a Source that tells when the directory changes, so that
// connections opened with a token since revoked can be cut. *Live is one;
// a fixed *Directory is not, and its connections are checked only when
// they open.
type Notifier interface {
	Source
	// Changed returns a channel closed once the directory has changed
	// after the call: Current then returns the new directory.
	Changed() <-chan struct{}
}

// Authenticator decides who a connection is from the token it presented
// (?tkn= or Authorization: Bearer; the daemon extracts it):
//
//   - the deployment's connection token is root:<Host>;
//   - a personal token in the users directory is user:<id>;
//   - anything else is refused.
//
// With no users directory there is nobody to name: the connection token is
// root and nothing else exists. A host that asks no connection token
// (ConnectionToken empty) and has no users directory takes every
// connection as root; with a users directory it takes personal tokens
// only, and root is then only the host's own stdio connection, which the
// daemon makes with RootPrincipal.
//
// An Authenticator is safe for concurrent use once set up.
type Authenticator struct {
	// Host is the machine's hostname, the <host> of root:<host>.
	Host string
	// ConnectionToken is the deployment's connection token, or "" for a
	// host that asks none.
	ConnectionToken string
	// Users is the users directory, or nil for a host with none.
	Users Source
}

// Root returns root:<Host>, the principal of the host's own connection.
func (a *Authenticator) Root() Principal { return RootPrincipal(a.Host) }

// Directory returns the users directory as it is now, or nil.
func (a *Authenticator) Directory() *Directory {
	if a.Users == nil {
		return nil
	}
	return a.Users.Current()
}

// Authenticate returns who presented token, or false if nobody did. The
// connection token is compared in constant time (over hashes, so its length
// is not given away either); personal tokens as Directory.Authenticate
// does.
func (a *Authenticator) Authenticate(token string) (Principal, bool) {
	c, ok := a.Login(token)
	return c.Principal, ok
}

// Credential is who a connection was found to be and, for a personal
// token, which one it presented (as its hash), so that the connection can
// be checked again when the users directory changes. The zero hash is a
// connection that is root: the connection token, or the host's own, which
// no change to the directory withdraws. A Credential made with only a
// Principal is such a one.
type Credential struct {
	Principal Principal
	hash      string // the personal token's hash, as the directory keeps it
}

// Login is Authenticate keeping what Recheck needs: it returns the
// credential of the connection that presented token, or false.
func (a *Authenticator) Login(token string) (Credential, bool) {
	if a.ConnectionToken != "" {
		got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(a.ConnectionToken))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			return Credential{Principal: a.Root()}, true
		}
	}
	d := a.Directory()
	if d == nil {
		if a.ConnectionToken == "" {
			return Credential{Principal: a.Root()}, true
		}
		return Credential{}, false
	}
	p, ok := d.Authenticate(token)
	if !ok {
		return Credential{}, false
	}
	return Credential{Principal: p, hash: hashToken(token)}, true
}

// Errors Recheck returns. Their text is what a client whose connection is
// cut is told, so it names nothing secret.
var (
	ErrTokenRevoked = errors.New("the connection's token was revoked")
	ErrUserRemoved  = errors.New("the connection's user was removed from the users directory")
)

// Recheck says whether a connection that logged in with c may still be
// served by the directory as it is now: nil, or ErrTokenRevoked or
// ErrUserRemoved (wrapped) when it may not. A user whose role changed
// keeps their connections: Check reads the role afresh for every
// operation.
func (a *Authenticator) Recheck(c Credential) error {
	if c.hash == "" {
		return nil
	}
	id, userKnown := a.Directory().holder(c.hash, c.Principal.ID)
	switch {
	case !userKnown:
		return fmt.Errorf("%s: %w", c.Principal, ErrUserRemoved)
	case id != c.Principal.ID:
		return fmt.Errorf("%s: %w", c.Principal, ErrTokenRevoked)
	}
	return nil
}

// Changed returns a channel closed when the users directory next changes,
// or nil (which never fires) when it cannot change while the host runs.
func (a *Authenticator) Changed() <-chan struct{} {
	if n, ok := a.Users.(Notifier); ok {
		return n.Changed()
	}
	return nil
}
