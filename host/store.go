package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"

	"github.com/ahpd/ahpd/internal/atomicfile"
	"github.com/ahpd/ahpd/internal/lockcheck"
)

// record is what the host keeps of a session across restarts: what is the
// host's own. The turns themselves come back from the backends'
// transcripts.
type record struct {
	// AHPD marks a file as ahpd's session record, and its format version.
	AHPD               int             `json:"ahpd"`
	URI                string          `json:"uri"`
	Provider           string          `json:"provider"`
	Title              string          `json:"title"`
	CreatedAt          string          `json:"createdAt"`
	ModifiedAt         string          `json:"modifiedAt"`
	WorkingDirectories []string        `json:"workingDirectories"`
	Config             protocol.Object `json:"config,omitempty"`
	Read               bool            `json:"read,omitempty"`
	Archived           bool            `json:"archived,omitempty"`
	Lifecycle          string          `json:"lifecycle"`
	CreationError      string          `json:"creationError,omitempty"`
	DefaultChat        string          `json:"defaultChat"`
	Chats              []*chatRecord   `json:"chats"`
	// Owner is whose the session is (user:<id>, root:<host>), written when
	// it is made and never changed; "" on a host with no users directory.
	Owner string `json:"owner,omitempty"`
	// Scope is the team/project the session's work is charged to.
	Scope string `json:"scope,omitempty"`
	// Metadata are the strings clients label the session with
	// (metadata.go).
	Metadata map[string]string `json:"metadata,omitempty"`

	// Folder is the folder the session was made in, which its config is
	// resolved against; "" in older records, where it is the first
	// working directory.
	Folder string `json:"folder,omitempty"`
	// Tree is the worktree made for the session on its first send. It is
	// the session's until it is disposed, even if the session moves on.
	Tree *worktree.Tree `json:"tree,omitempty"`
	// Checkpoints is how many turn checkpoints the session has: turn/0 up
	// to turn/<Checkpoints-1>. Untracked says its folder is no git
	// repository, so it has none and counts what its tools wrote.
	Checkpoints int  `json:"checkpoints,omitempty"`
	Untracked   bool `json:"untracked,omitempty"`
	// Changes are the counts read when the last turn ended.
	Changes *protocol.ChangesSummary `json:"changes,omitempty"`
	// External marks a session found in a backend's transcripts that a
	// client opened here: it is not the host's own until a person's turn
	// goes out in it.
	External bool `json:"external,omitempty"`
	// TitleFrom says where the title came from: "" (the default),
	// "message" (the first message), "agent" (the backend named it) or
	// "client" (somebody renamed it, which nothing overrides).
	TitleFrom string `json:"titleFrom,omitempty"`
}

// folder returns the folder the session was made in.
func (r *record) folder() string {
	if r.Folder != "" {
		return r.Folder
	}
	if r.Tree != nil && r.Tree.Repo != "" {
		return r.Tree.Repo
	}
	if len(r.WorkingDirectories) > 0 {
		return r.WorkingDirectories[0]
	}
	return ""
}

// chatRecord is what the host keeps of one chat.
type chatRecord struct {
	URI        string `json:"uri"`
	Title      string `json:"title"`
	ModifiedAt string `json:"modifiedAt"`
	// Conversation is the backend's id of the chat's conversation: the
	// session's id for the default chat unless the backend chose its own.
	Conversation string `json:"conversation"`
	// Started says the backend has the conversation, so it is resumed
	// rather than started again.
	Started bool `json:"started,omitempty"`
	// Senders records who sent each turn, by turn id.
	Senders map[string]string `json:"senders,omitempty"`
	// Changes are the chat's own counts (see session changes).
	Changes *protocol.ChangesSummary `json:"changes,omitempty"`
	// Read and Archived are the chat's own marks.
	Read     bool `json:"read,omitempty"`
	Archived bool `json:"archived,omitempty"`
	// Timing is each finished turn's start and duration as clients were
	// told them, by turn id: a backend's transcript keeps its own clock,
	// and turns read back from it are given these.
	Timing map[string]turnTiming `json:"timing,omitempty"`
	// Cut are the newest turns a stop of the host cut short (restart.go),
	// as clients saw them end: the backend may not have kept them, and
	// they are put back among the turns read from it.
	Cut []protocol.Turn `json:"cut,omitempty"`
	// TurnsAt is where in the session's journal a snapshot holds the
	// chat's finished turns as they are now, 0 when none is known to
	// (turntrack.go): a chat whose turns were forgotten gets them back
	// from there.
	TurnsAt uint64 `json:"turnsAt,omitempty"`
	// Steering, Queued and Draft are the chat's messages waiting to be
	// sent, and its draft: a start of the host that reads no journal
	// (after a clean stop) gets them from here.
	Steering *protocol.PendingMessage  `json:"steering,omitempty"`
	Queued   []protocol.PendingMessage `json:"queued,omitempty"`
	Draft    *protocol.Message         `json:"draft,omitempty"`
}

// turnTiming is when a turn started and how long it took, as sent.
type turnTiming struct {
	StartedAt string `json:"startedAt"`
	Duration  int64  `json:"duration"`
}

const recordVersion = 1

// store keeps session records.
type store interface {
	load() ([]*record, error)
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

func (memoryStore) load() ([]*record, error)  { return nil, nil }
func (memoryStore) save(string, []byte) error { return nil }
func (memoryStore) remove(string) error       { return nil }

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

func (s *fileStore) load() ([]*record, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []*record
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

func readRecord(path string) (*record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("not a session record: %w", err)
	}
	if rec.AHPD != recordVersion {
		return nil, fmt.Errorf("not a session record of this version (ahpd=%d)", rec.AHPD)
	}
	if _, err := protocol.ParseSessionURI(rec.URI); err != nil {
		return nil, err
	}
	return &rec, nil
}

// save writes the record atomically (writeFileAtomic).
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

// encodeRecord is a record as the store writes it.
func encodeRecord(rec *record) ([]byte, error) {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding session %s: %w", rec.URI, err)
	}
	return append(data, '\n'), nil
}

// createTemp makes the temporary files records are written through
// (nil: os.CreateTemp); tests give one that fails as a full disk does.
type createTemp = atomicfile.CreateTemp

// tempFile is what createTemp makes.
type tempFile = atomicfile.File

// writeFileAtomic writes data to path so that a crash leaves the old file
// or the new one, never half of either.
func writeFileAtomic(path string, data []byte) error {
	return atomicfile.Write(path, data, nil)
}

func (s *fileStore) remove(id string) error {
	err := os.Remove(filepath.Join(s.dir, fileName(id)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(s.dir)
}
