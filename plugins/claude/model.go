package claude

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ahpd/ahpd/protocol"
)

// Which model a turn runs on. The client picks one per turn
// (message.model, VS Code's model picker, listed from Info's models); a
// turn that picks none, or "default", runs the session's: the model key
// of a config made before the picker was honoured (no longer offered as
// a property, so that VS Code shows no second picker, but still read),
// else the CLI's own default.
//
// A CLI is started with --model. A resident CLI asked for another model
// is switched with the stream-json control request set_model (the Agent
// SDK's setModel), which the pinned CLI (2.1.197) answers in about a
// millisecond, rather than restarted with --resume and the new --model,
// which costs the process start again (against the test mock on two
// busy cores, a turn took about 500 ms after a restart and 20 to 60 ms
// after a switch) and ends what the process holds between turns
// (background shells, MCP servers). The
// switch is what the CLI's own /model command does: the CLI records it
// in the conversation as three user lines (a caveat marked isMeta, the
// command and its output, both tagged), which the model then sees as
// context and the transcript reader skips. A CLI that refuses or does not
// answer the switch is restarted with --model instead.

// modelDefault is the model value that leaves the choice to the CLI.
const modelDefault = "default"

// modelSwitchWait bounds the wait for the CLI's answer to set_model. An
// idle CLI answers at once; one still starting reads its stdin only once
// it is up, which on a loaded machine takes seconds.
const modelSwitchWait = 30 * time.Second

// Model is a model the backend offers for a client to pick: an ID the
// CLI takes as --model (an alias such as "sonnet", or a full model name),
// and a name for people.
type Model struct {
	ID   string
	Name string
}

// DefaultModels are the models a backend offers when its Options name
// none: the session's default, and the aliases the CLI resolves to its
// latest model of each family.
var DefaultModels = []Model{
	{modelDefault, "Default"},
	{"sonnet", "Claude Sonnet"},
	{"opus", "Claude Opus"},
	{"haiku", "Claude Haiku"},
}

// offeredModels returns the models to offer: list, less the entries no
// --model may carry, or DefaultModels when list is nil.
func offeredModels(list []Model) []Model {
	if list == nil {
		return DefaultModels
	}
	out := make([]Model, 0, len(list))
	for _, m := range list {
		if validModel(m.ID) {
			if m.Name == "" {
				m.Name = m.ID
			}
			out = append(out, m)
		}
	}
	return out
}

// pick takes the model a turn's message picked. A message that picks
// none, "default", or one no CLI flag may carry, runs the session's.
func (a *Agent) pick(m *protocol.ModelSelection) {
	picked := ""
	if m != nil && m.ID != modelDefault {
		if validModel(m.ID) {
			picked = m.ID
		} else {
			a.log.Warn("a turn picked a model the CLI cannot be asked for; it runs the session's", "model", protocol.Quote(m.ID))
		}
	}
	a.mu.Lock()
	a.picked = picked
	a.mu.Unlock()
}

// wantedModel returns the model the next turn runs on: the one picked,
// else the config's, else "" for the CLI's default. Called with a.mu
// held.
func (a *Agent) wantedModel() string {
	if a.picked != "" {
		return a.picked
	}
	if m := stringValue(a.config[ConfigModel]); m != modelDefault && validModel(m) {
		return m
	}
	return ""
}

// validModel reports whether id may go to the CLI as --model's value: a
// model name or alias (claude-opus-4-8, haiku, sonnet[1m]), never what
// the CLI would read as a flag.
func validModel(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._:[]@/", r)) {
			return false
		}
	}
	return true
}

// setModel switches the idle CLI p to model ("" for its default) and
// waits for it to say it did. What else the CLI prints meanwhile (the
// switch's note) is no turn's and is dropped.
func (a *Agent) setModel(ctx context.Context, p *process, model string) error {
	value := model
	if value == "" {
		value = modelDefault
	}
	id := "ahpd-model-" + newUUID()
	if err := p.send(controlRequestLine{
		Type:      "control_request",
		RequestID: id,
		Request:   controlRequest{Subtype: "set_model", Model: value},
	}); err != nil {
		return err
	}
	timeout := time.NewTimer(modelSwitchWait)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return errors.New("claude: the CLI's output ended before it switched models")
			}
			var resp struct {
				Type     string          `json:"type"`
				Response controlResponse `json:"response"`
			}
			if decodeLine(line, &resp) != nil || resp.Type != "control_response" || resp.Response.RequestID != id {
				a.log.Debug("dropping a line printed while switching models", "line", truncate(line))
				continue
			}
			if resp.Response.Subtype != "success" {
				return fmt.Errorf("claude: the CLI refused to switch to model %q: %s", value, resp.Response.Error)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-a.closing.Done():
			return errClosed
		case <-timeout.C:
			return fmt.Errorf("claude: the CLI did not answer a switch to model %q within %v", value, modelSwitchWait)
		}
	}
}
