package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/atomicfile"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// store keeps session records.
type store interface {
	load() ([]*session.Record, error)
	// save writes a record, encoded by encodeRecord.
	save(id string, data []byte) error
	remove(id string) error
}

// openStore opens the session store of the kind asked for. create makes
// the temporary files the file store writes through; nil means
// os.CreateTemp (tests pass one that fails as a full disk does).
func openStore(kind, stateDir string, log *slog.Logger, create createTemp) (store, error) {
	switch kind {
	case "", "file":
		if stateDir == "" {
			return nil, errors.New("host: the file store needs a state directory")
		}
		dir := filepath.Join(stateDir, "sessions")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("host: making the session store: %w", err)
		}
		return &fileStore{foreignMu: lockcheck.Mutex{Class: "store"}, dir: dir, log: log, foreign: map[string]bool{}, create: create}, nil
	case "memory":
		return memoryStore{}, nil
	}
	return nil, fmt.Errorf("host: unknown session store %q (want file or memory)", kind)
}

// memoryStore keeps nothing: a daemon started for one run.
type memoryStore struct{}

func (memoryStore) load() ([]*session.Record, error) { return nil, nil }
func (memoryStore) save(string, []byte) error        { return nil }
func (memoryStore) remove(string) error              { return nil }

// fileStore keeps one JSON file per session, written atomically. Its
// methods may be called concurrently, for different sessions.
type fileStore struct {
	dir string
	log *slog.Logger
	// foreign names files in the store that are not session records this
	// host can read; they are never overwritten silently.
	foreignMu lockcheck.Mutex
	foreign   map[string]bool
	// create makes the temporary file a record is written through; nil
	// means os.CreateTemp.
	create createTemp
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// fileName names a session's file: its id when that is a plain name, else
// a digest of it.
func fileName(id string) string {
	if safeName.MatchString(id) && !strings.Contains(id, "..") {
		return id + ".json"
	}
	sum := sha256.Sum256([]byte(id))
	return "x-" + hex.EncodeToString(sum[:16]) + ".json"
}

func (s *fileStore) load() ([]*session.Record, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []*session.Record
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			if atomicfile.IsTemp(name) {
				// A write that never finished: the file it was to replace
				// is still whole.
				_ = os.Remove(filepath.Join(s.dir, name))
			}
			continue
		}
		path := filepath.Join(s.dir, name)
		rec, err := readRecord(path)
		if err == nil && fileName(idOf(rec.URI)) != name {
			err = fmt.Errorf("the record is for session %s, which is stored under another name", rec.URI)
		}
		if err != nil {
			s.foreignMu.Lock()
			s.foreign[name] = true
			s.foreignMu.Unlock()
			s.log.Warn("skipping a file the session store cannot read", "file", path, "err", err)
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

func idOf(uri string) string {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return ""
	}
	return su.ID
}

func readRecord(path string) (*session.Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return session.DecodeRecord(data)
}

// save writes the record atomically (atomicfile.Write).
func (s *fileStore) save(id string, data []byte) error {
	name := fileName(id)
	path := filepath.Join(s.dir, name)
	if err := s.moveAside(name, path); err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, &atomicfile.Options{CreateTemp: s.create}); err != nil {
		return fmt.Errorf("writing session %s: %w", id, err)
	}
	return nil
}

// moveAside moves an unreadable file out of the way of a session's record,
// keeping it.
func (s *fileStore) moveAside(name, path string) error {
	s.foreignMu.Lock()
	defer s.foreignMu.Unlock()
	if !s.foreign[name] {
		return nil
	}
	aside := path + ".unreadable-" + time.Now().UTC().Format("20060102T150405")
	if err := os.Rename(path, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("moving aside %s: %w", path, err)
	}
	s.log.Warn("moved an unreadable file aside to store a session in its place", "file", path, "aside", aside)
	delete(s.foreign, name)
	return nil
}

// createTemp makes the temporary files records are written through
// (nil: os.CreateTemp); tests give one that fails as a full disk does.
type createTemp = atomicfile.CreateTemp

// tempFile is what createTemp makes.
type tempFile = atomicfile.File

func (s *fileStore) remove(id string) error {
	err := os.Remove(filepath.Join(s.dir, fileName(id)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(s.dir)
}
