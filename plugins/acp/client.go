package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
)

// client is ahpd's side of one ACP connection: it receives the agent's
// session updates and serves its requests for permissions, files and
// terminals.
//
// Session updates reach it through the connection's stdoutReader, which
// posts them to the mailbox without waiting on ahpd; requests each run
// on their own goroutine and may wait (for the user, for a command).
type client struct {
	log *slog.Logger

	// dirs are the working directory as the session names it and with
	// its symlinks resolved; files and terminals stay beneath it.
	dirs  []string
	root  *os.Root // the resolved working directory
	terms *terminals

	box *mailbox // updates on their way to the sinks they came for

	// policy is the session's permissions as the latest config values
	// give them: they answer the agent's permission requests before a
	// person is asked (turn.go), and what they deny the client refuses
	// to do for the agent (files, terminals) whether it asked or not.
	policy atomic.Pointer[plugins.Policy]

	mu   sync.Mutex
	sink sink // where session updates go; nil between turns
}

var _ sdk.Client = (*client)(nil)

// sink receives the session updates of what the connection is doing: a
// turn, or the replay of a loaded session. kind is the update's
// sessionUpdate name. Updates come from the client's mailbox, in order.
type sink interface {
	update(kind string, u sdk.SessionUpdate)
}

// discard is the sink of a replay nobody reads: the replay of a session
// the host resumes, whose turns it has.
type discard struct{}

func (discard) update(string, sdk.SessionUpdate) {}

// asker is a sink that can ask the user for permissions: a turn.
type asker interface {
	permission(ctx context.Context, req sdk.RequestPermissionRequest) sdk.RequestPermissionResponse
}

func newClient(dir string, log *slog.Logger) (*client, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("acp: working directory: %w", err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("acp: working directory: %w", err)
	}
	return &client{
		log:   log,
		dirs:  []string{filepath.Clean(dir), real},
		root:  root,
		terms: newTerminals(log),
		box:   newMailbox(log),
	}, nil
}

// setSink directs the session updates to s, or drops them if s is nil,
// once the updates for the sink before have reached it.
func (c *client) setSink(s sink) {
	c.box.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sink = s
}

// close ends the terminals and lets the working directory go.
func (c *client) close() {
	c.terms.closeAll()
	c.root.Close()
}

// sinkNow returns where session updates go now.
func (c *client) sinkNow() sink {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sink
}

// notified takes the params of a session/update notification the
// stdoutReader read, for the sink of the moment.
func (c *client) notified(params json.RawMessage) {
	s := c.sinkNow()
	if s == nil {
		c.log.Debug("session update outside a turn")
		return
	}
	c.box.postRaw(s, params)
}

// SessionUpdate takes a session/update notification the SDK decoded. The
// stdoutReader takes every one out of the stream before the SDK sees it,
// so this is there for the sdk.Client interface; it would hand the update
// on as notified does.
func (c *client) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	s := c.sinkNow()
	if s == nil {
		c.log.Debug("session update outside a turn", "kind", updateKind(n.Update))
		return nil
	}
	c.box.postDecoded(s, n)
	return nil
}

// RequestPermission asks the user through the running turn. Outside a
// turn nobody can answer: the request is cancelled.
func (c *client) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	a, ok := c.sink.(asker)
	c.mu.Unlock()
	if !ok {
		c.log.Info("permission asked outside a turn; cancelled", "toolCallId", req.ToolCall.ToolCallId)
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return a.permission(ctx, req), nil
}

// denied refuses what the session's permissions deny the agent, asked or
// not: a deny rule holds however the agent goes about it. What they would
// allow or ask is left to the agent's own permission requests.
func (c *client) denied(call plugins.ToolCall) error {
	d := c.policy.Load().Decide(call)
	if d.Verdict != plugins.Deny {
		return nil
	}
	c.log.Info("refused what the session's permissions deny", "kind", call.Kind, "paths", call.Paths, "rule", d.Rule)
	return sdk.NewInvalidParams(map[string]any{"error": d.Reason()})
}

// updateKind returns the sessionUpdate name of u. The SDK decodes a kind
// it does not know into whichever variant has the members the payload
// has, with the real name kept in that variant's SessionUpdate field, so
// the name, not the variant, says what an update is.
func updateKind(u sdk.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return u.UserMessageChunk.SessionUpdate
	case u.AgentMessageChunk != nil:
		return u.AgentMessageChunk.SessionUpdate
	case u.AgentThoughtChunk != nil:
		return u.AgentThoughtChunk.SessionUpdate
	case u.ToolCall != nil:
		return u.ToolCall.SessionUpdate
	case u.ToolCallUpdate != nil:
		return u.ToolCallUpdate.SessionUpdate
	case u.Plan != nil:
		return u.Plan.SessionUpdate
	case u.AvailableCommandsUpdate != nil:
		return u.AvailableCommandsUpdate.SessionUpdate
	case u.CurrentModeUpdate != nil:
		return u.CurrentModeUpdate.SessionUpdate
	case u.ConfigOptionUpdate != nil:
		return u.ConfigOptionUpdate.SessionUpdate
	case u.SessionInfoUpdate != nil:
		return u.SessionInfoUpdate.SessionUpdate
	case u.UsageUpdate != nil:
		return u.UsageUpdate.SessionUpdate
	}
	return ""
}

// blockText returns the text of a text content block. Other blocks
// (images, resources) have no place in a Markdown response yet.
func blockText(b sdk.ContentBlock) (string, bool) {
	if b.Text == nil {
		return "", false
	}
	return b.Text.Text, true
}
