package automations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/internal/atomicfile"
	"github.com/ahpd/ahpd/protocol"
)

// record is one automation as kept on disk: one file per automation under
// a folder per owner, written whole (temp file, fsync, rename).
type record struct {
	Version    int                           `json:"version"`
	Owner      string                        `json:"owner"`
	Resource   protocol.URI                  `json:"resource"`
	Definition protocol.AutomationDefinition `json:"definition"`
	CreatedAt  string                        `json:"createdAt"`
	ModifiedAt string                        `json:"modifiedAt"`
	RunCount   int64                         `json:"runCount,omitempty"`
	// LastFire is, per schedule trigger, the last occurrence accounted
	// for (run or skipped): the next is the first after it.
	LastFire map[string]time.Time `json:"lastFire,omitempty"`
	// FromConfig marks an automation the config file declares.
	FromConfig bool        `json:"fromConfig,omitempty"`
	Runs       []runRecord `json:"runs"` // newest first
}

// runRecord is one run as kept on disk.
type runRecord struct {
	State     protocol.AutomationRunState `json:"state"`
	RequestID string                      `json:"requestId,omitempty"`
	Depth     int                         `json:"depth,omitempty"`
}

const recordVersion = 1

// store keeps records under dir; a nil store keeps nothing.
type store struct{ dir string }

func hashName(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

func (s *store) path(owner string, uri protocol.URI) string {
	return filepath.Join(s.dir, hashName(owner), hashName(uri)+".json")
}

// save writes r whole, atomically.
func (s *store) save(r *record) error {
	if s == nil {
		return nil
	}
	data, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return fmt.Errorf("encode automation %s: %w", r.Resource, err)
	}
	p := s.path(r.Owner, r.Resource)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("save automation %s: %w", r.Resource, err)
	}
	return atomicfile.Write(p, data, nil)
}

// remove deletes r's file.
func (s *store) remove(owner string, uri protocol.URI) error {
	if s == nil {
		return nil
	}
	err := os.Remove(s.path(owner, uri))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// load reads every record; a file that does not read is set aside with a
// .bad suffix and reported, so one damaged file costs one automation.
func (s *store) load() ([]*record, []error) {
	if s == nil {
		return nil, nil
	}
	var out []*record
	var errs []error
	owners, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, []error{err}
	}
	for _, o := range owners {
		if !o.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(s.dir, o.Name(), "*.json"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			var r record
			if err == nil {
				err = json.Unmarshal(data, &r)
			}
			// Owner "" is a valid owner: nobody, as a host without a users
			// directory names everyone who connects.
			if err == nil && (r.Version != recordVersion || r.Resource == "") {
				err = fmt.Errorf("not an automation record of version %d", recordVersion)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("automation file %s: %w (set aside as .bad)", f, err))
				_ = os.Rename(f, f+".bad")
				continue
			}
			out = append(out, &r)
		}
	}
	return out, errs
}
