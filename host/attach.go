package host

import (
	"encoding/json"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// Attaching to sessions: a connection holds at most
// Limits.AttachedSessions session subscriptions (conn.RoomToWatch); which
// channels count is isSessionURI's to say.

// isSessionURI reports whether a channel is a session's: what counts
// against Limits.AttachedSessions.
func isSessionURI(uri string) bool {
	if isAutomationChannel(uri) {
		return false
	}
	kind, err := protocol.ClassifyChannel(uri)
	return err == nil && kind == protocol.ChannelSession
}

// Why a reconnect is sent snapshots rather than what it missed, in the
// result's _meta (reasonMeta). tooFarBehind is the word the HTTP event
// stream ends with when it falls behind (httpapi/events.go), and that a
// connection cut for a full queue closes with.
const (
	// tooFarBehind: the gap is past what the host keeps (the journal's
	// retention, a write that failed, more than a reconnect replays; or
	// the in-memory buffer, with no journal).
	tooFarBehind = conn.TooFarBehind
	// notReplayable: the gap cannot be read (a channel whose actions are
	// not journaled, such as an automation's; the journal unreadable).
	notReplayable = "not_replayable"
	// movedHost: the client was last connected to another host of the
	// cluster, and the serverSeqs it saw are that host's.
	movedHost = "moved_host"
)

// reasonMetaKey is the _meta key a reconnect's snapshot result says why
// with.
const reasonMetaKey = "ahpd.reason"

// reasonMeta is a result's Extra carrying _meta {"ahpd.reason": why}.
func reasonMeta(why string) protocol.Object {
	meta, _ := json.Marshal(map[string]string{reasonMetaKey: why})
	return protocol.Object{"_meta": meta}
}
