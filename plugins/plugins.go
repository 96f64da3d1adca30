// Package plugins defines how ahpd runs agents: the Backend every agent
// runtime implements, the Agent that runs one conversation, the Turn an
// agent reports a turn's progress to, and the registry of backends by
// provider. The host reaches backends only through these interfaces.
package plugins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ahpd/ahpd/protocol"
)

// ErrNotFound is returned for a conversation the backend has no record of.
var ErrNotFound = errors.New("conversation not found")

// Backend is an agent runtime, named by its provider ("claude", "script",
// a configured ACP agent). Its methods may be called concurrently.
type Backend interface {
	// Info describes the backend as root/agentsChanged lists it.
	Info() protocol.AgentInfo

	// ConfigProperties are the session config keys the backend offers, in
	// the order a client should draw them.
	ConfigProperties() []Property

	// Start starts a new conversation or resumes one the backend already
	// has (opts.Resume). The agent runs until Close.
	Start(ctx context.Context, opts StartOptions) (Agent, error)

	// Turns reads a conversation's finished turns from the backend's own
	// record (its transcript), oldest first. A conversation with no
	// record gives ErrNotFound.
	Turns(ctx context.Context, conv Conversation) ([]protocol.Turn, error)

	// Delete removes the backend's copy of a conversation. Deleting one
	// that does not exist is not an error.
	Delete(ctx context.Context, conv Conversation) error
}

// Conversation names one conversation of a backend.
type Conversation struct {
	// ID is the conversation's id: the id the client chose for the
	// session, or one the backend assigned and the host recorded.
	ID string
	// Dir is the absolute path of the directory the agent works in.
	Dir string
}

// StartOptions are what a backend needs to start an agent.
type StartOptions struct {
	Conversation Conversation
	// Resume continues a conversation the backend already has.
	Resume bool
	// Config holds the session's config values, keyed as the properties
	// the backends and the host offer. Among them are the session's
	// permissions, which PolicyOf reads for the agent's working
	// directory; a Reconfigurer reads them again from the values
	// SetConfig gives.
	Config protocol.Object
}

// Property is one session config key a backend offers.
type Property struct {
	Key    string
	Schema protocol.SessionConfigPropertySchema
}

// Agent is one running conversation.
type Agent interface {
	// ID returns the conversation's id, which may be one the backend
	// assigned; the host records it to resume the conversation later.
	ID() string

	// Prompt runs one turn to its end, reporting what happens to t. It
	// returns nil when the turn completed, ctx.Err() when it was
	// cancelled, and any other error when the turn failed. Only one
	// Prompt runs at a time.
	Prompt(ctx context.Context, msg protocol.Message, t Turn) error

	// Close lets the agent go: its process ends, its conversation stays
	// with the backend.
	Close() error
}

// Continuer is an Agent that continues a turn that stopped at an
// interruption (see Interrupted), without a new message: what the host
// does for chat/turnResume. msg is the turn's message; t reports the rest
// of the turn as it does for Prompt, and the return value means what
// Prompt's does. The host starts a new agent for the conversation before
// it asks, since the one interrupted may be gone.
type Continuer interface {
	Continue(ctx context.Context, msg protocol.Message, t Turn) error
}

// Interrupted marks err as the error of a turn that stopped short for a
// reason that is not the agent's answer: its process died, the backend
// timed out. The turn ends in an error a client may resume when the
// backend's agents are Continuers. Interrupted(nil) is nil.
func Interrupted(err error) error {
	if err == nil {
		return nil
	}
	return &interruptedError{err}
}

// IsInterrupted reports whether err is, or wraps, an Interrupted error.
func IsInterrupted(err error) bool {
	var ie *interruptedError
	return errors.As(err, &ie)
}

type interruptedError struct{ err error }

func (e *interruptedError) Error() string { return e.err.Error() }
func (e *interruptedError) Unwrap() error { return e.err }

// Reconfigurer is an Agent that takes changed session config values while
// it runs. An agent that is not one reads the values when it next starts.
type Reconfigurer interface {
	SetConfig(values protocol.Object)
}

// Killer is an Agent that can be stopped at once, when asking it to stop
// (a cancelled turn, Close) takes too long: the host kills what is left
// at the end of its shutdown. Kill ends the agent's process and
// everything it started without waiting for them to finish anything; a
// Prompt or Close in progress then returns promptly. It may be called
// from any goroutine at any time, also while Prompt or Close run, and
// more than once.
type Killer interface {
	Kill()
}

// Resumable is an Agent that says whether its conversation survives Close,
// so the host may let it go while idle and resume it when it is needed. An
// agent that is not one is let go only when a client suspends its session
// (or when it died): the chat's next agent starts the conversation anew,
// and the chat says so in the next turn.
type Resumable interface {
	CanResume() bool
}

// Mortal is an Agent that can end of itself, without Close: its process
// exits, is killed, or breaks its connection. Dead is closed once it can
// take no more turns. A chat never keeps such an agent: it is closed, and
// the next turn starts a new one for the conversation (resumed when the
// dead one was Resumable). An agent that is not Mortal lives until Close,
// starting its process again itself when that is gone, as claude's does.
type Mortal interface {
	Dead() <-chan struct{}
}

// Turn receives what an agent does during a turn. Its methods are safe to
// call from any goroutine; they return at once unless they say they wait.
type Turn interface {
	// ID returns the turn's id, as the client named it. A backend that
	// keeps its own record of turns keeps this id, so the turns it reads
	// back are the ones clients know.
	ID() string

	// Text appends Markdown to the response.
	Text(s string)

	// Reasoning appends to the response's reasoning.
	Reasoning(s string)

	// ToolStart reports a tool call the agent is preparing.
	ToolStart(call ToolCall)

	// ToolRunning reports that a started tool call runs without asking.
	ToolRunning(id string, invocation protocol.StringOrMarkdown, input string)

	// Confirm asks the user to allow a tool call and waits for the
	// answer or for ctx to end. A call not yet started is started. A
	// backend asks the session's Policy first (see the Confirm function),
	// so a person is asked only what the policy leaves open.
	Confirm(ctx context.Context, call ToolCall) (bool, error)

	// Decided reports a tool call the session's permissions decided
	// without asking anyone: allowed, it runs, shown as confirmed by a
	// setting; denied, it ends as denied, with the decision's reason. A
	// call not yet started is started. The agent still reports what an
	// allowed call did (ToolDone); a denied call is ended by the host.
	Decided(call ToolCall, d Decision)

	// ToolDone reports a tool call's result; a failed tool is a result
	// with Success false, not an error of the turn.
	ToolDone(id string, result protocol.ToolCallResult)

	// Ask puts questions to the user and waits for the answer or for ctx
	// to end.
	Ask(ctx context.Context, req protocol.ChatInputRequest) (Answer, error)

	// Usage reports the tokens the turn used so far.
	Usage(u protocol.UsageInfo)

	// Title sets the session's title.
	Title(s string)

	// Background reports work the agent keeps running for the chat
	// outside its turns (a shell, a subagent) or, with done, that it
	// ended. A session with background work does not sleep.
	Background(w BackgroundWork, done bool)

	// Steered returns a channel that receives when a client has left a
	// steering message for the turn (see Steer). An agent that can take
	// one while it works watches it; one that does not is handed the
	// message as a new prompt of the same turn once its reply has ended.
	Steered() <-chan struct{}

	// Steer takes the steering message waiting for the turn, if any: the
	// clients see it leave the chat's pending messages, and the agent is
	// to act on it before the turn ends.
	Steer() (protocol.Message, bool)
}

// BackgroundWork is work an agent runs in the background.
type BackgroundWork struct {
	// ID names the work among the chat's.
	ID string
	// Label says what it is, for people.
	Label string
	// Command is the shell command it runs; Chat, a subagent's chat URI,
	// makes it a subagent instead.
	Command, Chat string
}

// ToolCall describes a tool call.
type ToolCall struct {
	ID          string
	Name        string // the tool's name, as the agent knows it
	DisplayName string // the tool's name, for people
	// Invocation says what the call will do ("Write a.txt").
	Invocation protocol.StringOrMarkdown
	// Input is the call's arguments as JSON text.
	Input string
	// Kind is the kind of tool (KindEdit, KindExecute, ...), which
	// permission rules name across backends; "" is KindOther.
	Kind string
	// Paths are the files the call reads or changes, absolute or
	// relative to the agent's working directory, as far as the backend
	// can tell: permission rules with a glob match them.
	Paths []string
}

// Answer is the user's reply to an input request.
type Answer struct {
	Response protocol.ChatInputResponseKind
	Answers  protocol.Map[protocol.ChatInputAnswer]
}

// Registry holds the backends by provider. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	backends map[string]Backend
	order    []string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{backends: map[string]Backend{}}
}

// Register adds b under its provider.
func (r *Registry) Register(b Backend) error {
	provider := b.Info().Provider
	if provider == "" {
		return errors.New("plugins: a backend needs a provider name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.backends[provider]; ok {
		return fmt.Errorf("plugins: provider %q is registered twice", provider)
	}
	r.backends[provider] = b
	r.order = append(r.order, provider)
	return nil
}

// Get returns the backend of provider.
func (r *Registry) Get(provider string) (Backend, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	b, ok := r.backends[provider]
	return b, ok
}

// Providers returns the providers in the order they were registered.
func (r *Registry) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Infos returns every backend's Info, in registration order.
func (r *Registry) Infos() []protocol.AgentInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]protocol.AgentInfo, 0, len(r.order))
	for _, p := range r.order {
		out = append(out, r.backends[p].Info())
	}
	return out
}
