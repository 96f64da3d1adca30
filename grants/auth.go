package grants

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Source gives the users directory as it is now. A nil result is a host
// with no users directory. *Live and *Directory are Sources.
type Source interface {
	Current() *Directory
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
	if a.ConnectionToken != "" {
		got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(a.ConnectionToken))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			return a.Root(), true
		}
	}
	d := a.Directory()
	if d == nil {
		if a.ConnectionToken == "" {
			return a.Root(), true
		}
		return Principal{}, false
	}
	return d.Authenticate(token)
}
