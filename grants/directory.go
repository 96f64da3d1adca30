package grants

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Role is what a user may do: admin everything, member every operation of
// the read and write groups, guest the read group only.
type Role string

// The roles.
const (
	Admin  Role = "admin"
	Member Role = "member"
	Guest  Role = "guest"
)

// ParseRole returns the role s names.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Admin, Member, Guest:
		return r, nil
	}
	return "", fmt.Errorf("role %s: want admin, member or guest", quote(s))
}

// Allows reports whether the role is granted op. It says nothing of
// ownership: Check adds that for session:dispose.
func (r Role) Allows(op Operation) bool {
	switch r {
	case Admin:
		return op.known()
	case Member:
		return op == None || op.Group() != ""
	case Guest:
		return op == None || op.Group() == GroupRead
	}
	return false
}

// Membership is a team and project a user belongs to. The primary one is
// what a session is charged to when it names no scope.
type Membership struct {
	Team    string `yaml:"team"`
	Project string `yaml:"project"`
	Primary bool   `yaml:"primary,omitempty"`
}

// Scope returns the team and project of m.
func (m Membership) Scope() Scope { return Scope{Team: m.Team, Project: m.Project} }

// TokenInfo describes one of a user's personal tokens without the token or
// its hash.
type TokenInfo struct {
	// ID is the first hex digits of the token's hash: enough to tell a
	// user's tokens apart and to name one to Revoke.
	ID      string
	Label   string
	Created time.Time
}

// User is one entry of the users directory, as Users and Lookup report it.
// It is a copy: changing it changes nothing in the directory.
type User struct {
	ID          string
	Name        string
	Role        Role
	Memberships []Membership
	Tokens      []TokenInfo
}

// Principal returns user:<id>.
func (u User) Principal() Principal { return UserPrincipal(u.ID) }

// Errors the management functions wrap, for a command line to tell apart.
var (
	ErrNoUser     = errors.New("no such user")
	ErrUserExists = errors.New("user already exists")
	ErrNoToken    = errors.New("no such token")
)

// Directory is the users directory: who may connect with a personal token,
// in which role, charged to which teams and projects.
//
// A nil *Directory is a host with no users directory: Authenticate finds
// nobody, Check refuses nobody and Scope charges nothing. A Directory is
// safe for concurrent use.
type Directory struct {
	mu     sync.RWMutex
	users  map[string]*fileUser
	byHash map[string]string // token hash -> user id
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{users: map[string]*fileUser{}, byHash: map[string]string{}}
}

// Current returns d, so that a fixed directory serves as a Source.
func (d *Directory) Current() *Directory { return d }

// Add adds a user with no memberships and no tokens.
func (d *Directory) Add(id, name string, role Role) error {
	if err := ValidID(id); err != nil {
		return err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	if err := validText("name", name, 200); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.users[id]; ok {
		return fmt.Errorf("user %q: %w", id, ErrUserExists)
	}
	d.users[id] = &fileUser{ID: id, Name: name, Role: role}
	return nil
}

// Remove removes a user and with it every token of theirs.
func (d *Directory) Remove(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return err
	}
	for _, t := range u.Tokens {
		delete(d.byHash, t.SHA256)
	}
	delete(d.users, id)
	return nil
}

// SetRole changes a user's role.
func (d *Directory) SetRole(id string, role Role) error {
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return err
	}
	u.Role = role
	return nil
}

// SetMemberships replaces a user's memberships. Several primaries, or
// none, are allowed here; Scope says so when it is asked to charge work.
func (d *Directory) SetMemberships(id string, ms []Membership) error {
	if err := validMemberships(ms); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return err
	}
	u.Memberships = slices.Clone(ms)
	return nil
}

// IssueToken makes a new personal token for a user and returns it. Only
// its hash is kept, so this is the one time anybody sees it. label, which
// may be empty, says where it is used.
func (d *Directory) IssueToken(id, label string) (string, error) {
	if err := validText("label", label, 100); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return "", err
	}
	token := newToken()
	h := hashToken(token)
	u.Tokens = append(u.Tokens, fileToken{SHA256: h, Created: time.Now().UTC().Truncate(time.Second), Label: label})
	d.byHash[h] = id
	return token, nil
}

// Revoke removes one of a user's tokens, named by its TokenInfo.ID, by
// its label if no other token of the user's has the same one, or by the
// token itself.
func (d *Directory) Revoke(id, ref string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return err
	}
	var h string
	if strings.HasPrefix(ref, TokenPrefix) {
		h = hashToken(ref)
	}
	match := -1
	for i, t := range u.Tokens {
		if ref != "" && (t.SHA256 == h || t.SHA256[:fingerprintLen] == ref || t.Label == ref) {
			if match >= 0 {
				return fmt.Errorf("user %q: %s names several tokens: give its id", id, quote(ref))
			}
			match = i
		}
	}
	if match < 0 {
		return fmt.Errorf("user %q: token %s: %w", id, quote(ref), ErrNoToken)
	}
	delete(d.byHash, u.Tokens[match].SHA256)
	u.Tokens = slices.Delete(u.Tokens, match, match+1)
	return nil
}

// RevokeAll removes every token of a user.
func (d *Directory) RevokeAll(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := d.user(id)
	if err != nil {
		return err
	}
	for _, t := range u.Tokens {
		delete(d.byHash, t.SHA256)
	}
	u.Tokens = nil
	return nil
}

// Users returns every user, sorted by id. A nil directory has none.
func (d *Directory) Users() []User {
	if d == nil {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]User, 0, len(d.users))
	for _, u := range d.users {
		out = append(out, u.public())
	}
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Lookup returns the user with the given id.
func (d *Directory) Lookup(id string) (User, bool) {
	if d == nil {
		return User{}, false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	u, ok := d.users[id]
	if !ok {
		return User{}, false
	}
	return u.public(), true
}

// Authenticate returns the user whose personal token this is.
//
// The presented token is hashed and the hash looked up in a map. That
// lookup is not constant-time, and need not be: what it could leak is how
// a hash of the attacker's own guess relates to the stored hashes, and a
// SHA-256 preimage of a 256-bit random token cannot be worked back from
// that.
func (d *Directory) Authenticate(token string) (Principal, bool) {
	if d == nil || token == "" {
		return Principal{}, false
	}
	h := hashToken(token)
	d.mu.RLock()
	defer d.mu.RUnlock()
	id, ok := d.byHash[h]
	if !ok {
		return Principal{}, false
	}
	return UserPrincipal(id), true
}

// holder returns the id of the user whose token has the hash h, or "",
// and whether user id is in the directory at all. A nil directory has
// nobody.
func (d *Directory) holder(h, id string) (holder string, known bool) {
	if d == nil {
		return "", false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, known = d.users[id]
	return d.byHash[h], known
}

// role returns the role of user:<id>, or false if there is no such user.
func (d *Directory) role(id string) (Role, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	u, ok := d.users[id]
	if !ok {
		return "", false
	}
	return u.Role, true
}

// user returns the entry for id. d.mu must be held.
func (d *Directory) user(id string) (*fileUser, error) {
	u, ok := d.users[id]
	if !ok {
		return nil, fmt.Errorf("user %s: %w", quote(id), ErrNoUser)
	}
	return u, nil
}

func sortUsers(us []fileUser) {
	slices.SortFunc(us, func(a, b fileUser) int { return strings.Compare(a.ID, b.ID) })
}

func (u *fileUser) public() User {
	out := User{ID: u.ID, Name: u.Name, Role: u.Role, Memberships: slices.Clone(u.Memberships)}
	for _, t := range u.Tokens {
		out.Tokens = append(out.Tokens, TokenInfo{ID: t.SHA256[:fingerprintLen], Label: t.Label, Created: t.Created})
	}
	return out
}

// validText checks a free-text field: a display name or a token's label.
func validText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s: at most %d bytes", what, max)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("%s: control characters and invalid UTF-8 are not allowed", what)
		}
	}
	return nil
}

// validScopeName checks a team or project name: 1 to 64 letters, digits,
// '.', '_' or '-', so that "team/project" is never ambiguous.
func validScopeName(what, s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%s %s: want 1 to 64 characters", what, quote(s))
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %s: only letters, digits, '.', '_' and '-' are allowed", what, quote(s))
		}
	}
	return nil
}

func validMemberships(ms []Membership) error {
	seen := map[Scope]bool{}
	for _, m := range ms {
		if err := validScopeName("team", m.Team); err != nil {
			return err
		}
		if err := validScopeName("project", m.Project); err != nil {
			return err
		}
		if seen[m.Scope()] {
			return fmt.Errorf("membership %s is listed twice", m.Scope())
		}
		seen[m.Scope()] = true
	}
	return nil
}
