package host

import (
	"encoding/json"
	"fmt"

	"github.com/ahpd/ahpd/protocol"
)

// Attaching to sessions: a connection holds at most
// Limits.AttachedSessions session subscriptions (chats, root and
// automations do not count; nor does subscribing again to a session
// held). Past it, subscribe is refused with reason too_many_attached,
// the convention read_only set: the reason is the message's first word,
// and the error's data names it too.

// tooManyAttachedReason is the reason a session subscription past the
// limit is refused with.
const tooManyAttachedReason = "too_many_attached"

// attachRefusal is the data of an error refusing an attach.
type attachRefusal struct {
	Reason string `json:"reason"`
	Limit  int    `json:"limit,omitempty"`
}

func tooManyAttached(held int) error {
	return &protocol.Error{
		Code: protocol.CodeInvalidRequest,
		Message: fmt.Sprintf("%s: this connection holds %d session subscriptions, the most it may: unsubscribe from one first",
			tooManyAttachedReason, held),
		Data: attachRefusal{Reason: tooManyAttachedReason, Limit: held},
	}
}

// isSessionURI reports whether a channel is a session's: what counts
// against Limits.AttachedSessions.
func isSessionURI(uri string) bool {
	if isAutomationChannel(uri) {
		return false
	}
	kind, err := protocol.ClassifyChannel(uri)
	return err == nil && kind == protocol.ChannelSession
}

// roomFor splits the channels a reconnect resumes into those c may hold
// and the sessions past Limits.AttachedSessions, which it is told are
// missing, as a subscribe of them would be refused.
func (c *conn) roomFor(channels []string) (kept []string, over []protocol.URI) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.sessions
	seen := map[string]bool{}
	for _, ch := range channels {
		if isSessionURI(ch) && !c.subs[ch] && !seen[ch] {
			if held >= c.limits.AttachedSessions {
				over = append(over, ch)
				continue
			}
			held++
			seen[ch] = true
		}
		kept = append(kept, ch)
	}
	return kept, over
}

// Why a reconnect is sent snapshots rather than what it missed, in the
// result's _meta (reasonMeta). tooFarBehind is the word the HTTP event
// stream ends with when it falls behind (httpapi/events.go), and that a
// connection cut for a full queue closes with.
const (
	// tooFarBehind: the gap is past what the host keeps (the journal's
	// retention, a write that failed, more than a reconnect replays; or
	// the in-memory buffer, with no journal).
	tooFarBehind = "too_far_behind"
	// notReplayable: the gap cannot be read (a channel whose actions are
	// not journaled, such as an automation's; the journal unreadable).
	notReplayable = "not_replayable"
)

// reasonMetaKey is the _meta key a reconnect's snapshot result says why
// with.
const reasonMetaKey = "ahpd.reason"

// reasonMeta is a result's Extra carrying _meta {"ahpd.reason": why}.
func reasonMeta(why string) protocol.Object {
	meta, _ := json.Marshal(map[string]string{reasonMetaKey: why})
	return protocol.Object{"_meta": meta}
}
