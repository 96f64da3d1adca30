package grants

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahpd/ahpd/internal/atomicfile"
)

// FormatVersion is the version of the users file this package reads and
// writes; the format is described in the package documentation. A file
// without a version is read as version 1.
const FormatVersion = 1

// fileHeader starts every file Save writes.
const fileHeader = `# ahpd users directory. Edit with "ahpd user" or by hand; ahpd re-reads
# it when it changes. Tokens are kept only as SHA-256 hashes.
`

// fileFormat is the users file.
type fileFormat struct {
	Version int        `yaml:"version"`
	Users   []fileUser `yaml:"users"`
}

type fileUser struct {
	ID          string       `yaml:"id"`
	Name        string       `yaml:"name,omitempty"`
	Role        Role         `yaml:"role"`
	Memberships []Membership `yaml:"memberships,omitempty"`
	Tokens      []fileToken  `yaml:"tokens,omitempty"`
}

type fileToken struct {
	SHA256  string    `yaml:"sha256"`
	Created time.Time `yaml:"created,omitempty"`
	Label   string    `yaml:"label,omitempty"`
}

// LoadFile reads the users file at path. A file that does not exist is an
// empty directory, so the first "ahpd user add" needs nothing else.
func LoadFile(path string) (*Directory, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewDirectory(), nil
	}
	if err != nil {
		return nil, err
	}
	d, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Decode reads a users file's contents. Empty contents are an empty
// directory. Errors never quote a value from the file, in case a secret
// was put where a hash belongs.
func Decode(data []byte) (*Directory, error) {
	var f fileFormat
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, errors.New(redact(err.Error()))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("users file: want one YAML document")
	}
	switch f.Version {
	case 0, FormatVersion:
	default:
		return nil, fmt.Errorf("users file: version %d is not %d: it was written by another ahpd", f.Version, FormatVersion)
	}
	d := NewDirectory()
	for i, u := range f.Users {
		if err := d.addLoaded(u); err != nil {
			return nil, fmt.Errorf("users[%d]: %w", i, err)
		}
	}
	return d, nil
}

// addLoaded adds a user read from a file, checking what a file can get
// wrong that the management functions cannot.
func (d *Directory) addLoaded(u fileUser) error {
	if err := ValidID(u.ID); err != nil {
		return err
	}
	if _, ok := d.users[u.ID]; ok {
		return fmt.Errorf("user %q: listed twice", u.ID)
	}
	if _, err := ParseRole(string(u.Role)); err != nil {
		return fmt.Errorf("user %q: %w", u.ID, err)
	}
	if err := validText("name", u.Name, 200); err != nil {
		return fmt.Errorf("user %q: %w", u.ID, err)
	}
	if err := validMemberships(u.Memberships); err != nil {
		return fmt.Errorf("user %q: %w", u.ID, err)
	}
	for j, t := range u.Tokens {
		if !validHash(t.SHA256) {
			return fmt.Errorf("user %q: tokens[%d]: sha256 is not 64 lower-case hex digits (a token is never stored, only its hash)", u.ID, j)
		}
		if _, dup := d.byHash[t.SHA256]; dup {
			return fmt.Errorf("user %q: tokens[%d]: the same token hash is listed twice", u.ID, j)
		}
		if err := validText("label", t.Label, 100); err != nil {
			return fmt.Errorf("user %q: tokens[%d]: %w", u.ID, j, err)
		}
		d.byHash[t.SHA256] = u.ID
	}
	d.users[u.ID] = &u
	return nil
}

// Encode returns the directory in the users file format, users sorted by
// id. Comments of a hand-edited file are not kept.
func (d *Directory) Encode() ([]byte, error) {
	f := fileFormat{Version: FormatVersion, Users: []fileUser{}}
	d.mu.RLock()
	for _, u := range d.users {
		f.Users = append(f.Users, *u)
	}
	d.mu.RUnlock()
	sortUsers(f.Users)
	var buf bytes.Buffer
	buf.WriteString(fileHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&f); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Save writes the directory to path atomically, readable by its owner
// only: a reader (another ahpd, the watcher) sees the old file or the new
// one, never part of either.
func (d *Directory) Save(path string) error {
	data, err := d.Encode()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, &atomicfile.Options{Perm: 0o600})
}
