package plugins

import (
	"context"
	"errors"

	"github.com/ahpd/ahpd/protocol"
)

// Forker is a Backend that can start a conversation as a copy of another
// up to one of its turns: what a chat made as a fork or a side chat of
// another (createChat with a source) runs on. A backend that is one says
// which of the two it offers in its Info (Capabilities.MultipleChats);
// the host asks only for those.
//
// Fork makes the new conversation exist in the backend's own record, so
// that the chat's agent resumes it (StartOptions.Resume) like any
// conversation the backend has, also after a restart. It returns the new
// conversation's id: opts.Into.ID, or one the backend chose. The source
// is not changed.
type Forker interface {
	Fork(ctx context.Context, opts ForkOptions) (string, error)
}

// ForkOptions say which conversation to copy, how far, and into what.
type ForkOptions struct {
	// From is the source conversation.
	From Conversation
	// TurnID is the source's last turn the copy holds: the copy has
	// every turn before it and it, and none after.
	TurnID string
	// Last says TurnID is the source's newest turn: a backend that can
	// copy only a whole conversation forks then and refuses otherwise.
	Last bool
	// Partial, when set, is the source's turn that is still running
	// (its id TurnID), as it stands: a side chat made from it gets the
	// turn so far as context. A backend's own record may not hold it yet.
	Partial *protocol.Turn
	// Seen is the finished turn TurnID as clients saw it end (nil for
	// Partial): a backend whose record lags behind its agent (the Claude
	// CLI writes its transcript on a timer) waits, bounded, for its record
	// to hold the turn whole.
	Seen *protocol.Turn
	// Into is the new conversation: the id the host chose for it, and
	// the directory it works in (the source's).
	Into Conversation
}

// ErrCannotFork marks a fork the backend cannot make for a reason a person
// can act on (the agent offers no fork, or only of a whole conversation):
// the host refuses the request saying why. A turn the backend has no
// record of is ErrNotFound instead.
var ErrCannotFork = errors.New("cannot fork")

// CannotFork returns an error saying why a fork cannot be made, which
// satisfies errors.Is(err, ErrCannotFork).
func CannotFork(why string) error { return &cannotFork{why} }

type cannotFork struct{ why string }

func (e *cannotFork) Error() string        { return e.why }
func (e *cannotFork) Is(target error) bool { return target == ErrCannotFork }

// Forks reports which of fork and side chat a backend offers: those its
// Info advertises, when it is a Forker.
func Forks(b Backend) (fork, side bool) {
	if _, ok := b.(Forker); !ok {
		return false, false
	}
	mc := b.Info().Capabilities
	if mc == nil || mc.MultipleChats == nil {
		return false, false
	}
	return deref(mc.MultipleChats.Fork), deref(mc.MultipleChats.SideChat)
}

func deref(b *bool) bool { return b != nil && *b }

// ChatCapabilities is the Capabilities member of a Forker's Info that
// advertises the forks it offers.
func ChatCapabilities(fork, side bool) *protocol.AgentCapabilities {
	return &protocol.AgentCapabilities{MultipleChats: &protocol.MultipleChatsCapability{Fork: new(fork), SideChat: new(side)}}
}
