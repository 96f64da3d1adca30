package session

import (
	"encoding/json"
	"fmt"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// DecodeRecord reads a record as a store wrote it: ahpd's, of this
// version, naming a session URI.
func DecodeRecord(data []byte) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("not a session record: %w", err)
	}
	if rec.AHPD != RecordVersion {
		return nil, fmt.Errorf("not a session record of this version (ahpd=%d)", rec.AHPD)
	}
	if _, err := protocol.ParseSessionURI(rec.URI); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Record is what the host keeps of a session across restarts: what is the
// host's own. The turns themselves come back from the backends'
// transcripts.
type Record struct {
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
	Chats              []*ChatRecord   `json:"chats"`
	// Owner is whose the session is (user:<id>, root:<host>), written when
	// it is made and never changed; "" on a host with no users directory.
	Owner string `json:"owner,omitempty"`
	// Scope is the team/project the session's work is charged to.
	Scope string `json:"scope,omitempty"`
	// Metadata are the strings clients label the session with
	// (metadata.go).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Request is a digest of the createSession request that made the
	// session (who sent it and what it asked for): a client that sends it
	// again, not knowing whether the first got through, is answered as
	// the first was.
	Request string `json:"request,omitempty"`

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
	// Owed says a turn ended after the newest checkpoint and none
	// records it yet (its capture waits for git, was folded into the
	// next turn's, or the turn was cancelled): after a restart the next
	// turn starts from the newest checkpoint, so that its checkpoint
	// covers that turn too, rather than from a snapshot holding it.
	Owed bool `json:"checkpointOwed,omitempty"`
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

// Dir returns the folder the session was made in.
func (r *Record) Dir() string {
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

// ChatRecord is what the host keeps of one chat.
type ChatRecord struct {
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
	// Request is a digest of the createChat request that made the chat,
	// as Record.Request is of a session's.
	Request string `json:"request,omitempty"`
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
	// Origin is how the chat came to be (protocol.ChatOrigin) when it
	// was made from another chat (fork.go); none is a user's.
	Origin json.RawMessage `json:"origin,omitempty"`
	// ContextThrough is, for a side chat, the last turn of the source
	// its backend copy holds as context: the turns read back from the
	// backend through it are not the chat's.
	ContextThrough string `json:"contextThrough,omitempty"`
}

// turnTiming is when a turn started and how long it took, as sent.
type turnTiming struct {
	StartedAt string `json:"startedAt"`
	Duration  int64  `json:"duration"`
}

// EncodeRecord is a record as the store writes it.
func EncodeRecord(rec *Record) ([]byte, error) {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding session %s: %w", rec.URI, err)
	}
	return append(data, '\n'), nil
}
