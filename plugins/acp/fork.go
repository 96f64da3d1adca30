package acp

import (
	"cmp"
	"context"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

var _ plugins.Forker = (*Backend)(nil)

// noteCaps keeps what a launched agent said it can do that the backend's
// Info advertises: whether its sessions can be forked.
func (b *Backend) noteCaps(caps sdk.AgentCapabilities) {
	b.forks.Store(canFork(caps))
}

// canFork reports whether an agent's fork outlives the process that made
// it: it offers session/fork, and brings a session back in another
// process (load or resume), as the chat's agent must.
func canFork(caps sdk.AgentCapabilities) bool {
	return caps.SessionCapabilities.Fork != nil && (caps.LoadSession || caps.SessionCapabilities.Resume != nil)
}

// chatCapabilities advertises a fork once an agent launched offered one.
// An ACP fork copies a whole session, which no side chat can use: a side
// chat is made from a turn that may not be the last, or still running.
func (b *Backend) chatCapabilities() *protocol.AgentCapabilities {
	if !b.forks.Load() {
		return nil
	}
	return plugins.ChatCapabilities(true, false)
}

// Fork forks opts.From with ACP's session/fork (unstable in ACP v1, an
// unstable method of the Go SDK), in an agent process of its own that ends
// with it. session/fork copies a whole session, so only the conversation's
// last turn can be forked; an agent that does not offer it, or that cannot
// bring the fork back in the chat's own process, is refused saying so.
func (b *Backend) Fork(ctx context.Context, opts plugins.ForkOptions) (string, error) {
	if opts.Partial != nil || !opts.Last {
		return "", plugins.CannotFork(fmt.Sprintf("%s forks a whole conversation (ACP session/fork): fork its last finished turn, not %s", b.name(), opts.TurnID))
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.StartTimeout, defaultStartTimeout))
	defer cancel()
	in, err := b.launch(ctx, opts.From.Dir)
	if err != nil {
		return "", err
	}
	defer in.close()
	caps := in.caps()
	switch {
	case caps.SessionCapabilities.Fork == nil:
		return "", plugins.CannotFork(fmt.Sprintf("%s does not offer session/fork (its ACP sessionCapabilities have no fork)", b.name()))
	case !canFork(caps):
		return "", plugins.CannotFork(fmt.Sprintf("%s can neither load nor resume sessions, so a fork would not outlive the process that made it", b.name()))
	}
	resp, err := in.conn.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: sdk.SessionId(opts.From.ID), Cwd: opts.From.Dir})
	if err != nil {
		return "", in.failure(ctx, "forking the session", err)
	}
	if resp.SessionId == "" {
		return "", fmt.Errorf("acp: %s forked the session into one without an id", b.name())
	}
	return string(resp.SessionId), nil
}

func (b *Backend) name() string { return cmp.Or(b.cfg.DisplayName, b.cfg.Name) }
