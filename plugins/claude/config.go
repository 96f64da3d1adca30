package claude

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The session config keys the backend reads. It offers all but
// ConfigModel: a turn's model is the one its message picks (model.go),
// and a config's model, from a session made before, is only read, as
// that session's default.
const (
	ConfigModel           = "model"
	ConfigPermissionMode  = "permissionMode"
	ConfigAllowedTools    = "allowedTools"
	ConfigDisallowedTools = "disallowedTools"
)

// permissionModes are the CLI's --permission-mode values the backend
// offers, with a label and a description each. The CLI knows others
// (auto, dontAsk) that make no sense with a person answering prompts.
var permissionModes = []struct{ id, label, description string }{
	{"default", "Ask", "Ask before editing files or running commands"},
	{"acceptEdits", "Accept edits", "Edit files without asking; ask before running commands"},
	{"plan", "Plan", "Read and plan only; change nothing"},
	{"bypassPermissions", "Bypass permissions", "Never ask (refused when the CLI runs as root)"},
}

// ConfigProperties offers the permission mode, and the tools allowed
// without asking or never allowed. All of them can change while a session
// runs: the CLI restarts with them before the next turn. The model is no
// property: it is picked per turn from Info's models.
func (b *Backend) ConfigProperties() []plugins.Property {
	var modeEnum []jsontext.Value
	var modeLabels, modeDescs []string
	for _, m := range permissionModes {
		modeEnum = append(modeEnum, quote(m.id))
		modeLabels = append(modeLabels, m.label)
		modeDescs = append(modeDescs, m.description)
	}
	toolList := func(key, title, desc string) plugins.Property {
		return plugins.Property{Key: key, Schema: protocol.SessionConfigPropertySchema{
			Type:           "array",
			Title:          title,
			Description:    new(desc),
			Items:          &protocol.ConfigPropertySchema{Type: "string", Title: "Tool"},
			Default:        jsontext.Value(`[]`),
			SessionMutable: new(true),
		}}
	}
	return []plugins.Property{
		{Key: ConfigPermissionMode, Schema: protocol.SessionConfigPropertySchema{
			Type:             "string",
			Title:            "Permissions",
			Description:      new("When Claude Code asks before it uses a tool."),
			Enum:             modeEnum,
			EnumLabels:       modeLabels,
			EnumDescriptions: modeDescs,
			Default:          quote("default"),
			SessionMutable:   new(true),
		}},
		toolList(ConfigAllowedTools, "Allowed tools", `Tools used without asking, as the CLI names them ("Bash(git log:*)", "Edit").`),
		toolList(ConfigDisallowedTools, "Disallowed tools", "Tools Claude Code may not use at all."),
	}
}

func quote(s string) jsontext.Value {
	v, _ := jsontext.AppendQuote(nil, s)
	return v
}

// configArgs returns the CLI flags that carry config, but for the model,
// which a resident CLI can switch without a restart (model.go). A value
// of the wrong type is ignored rather than guessed at; an unknown
// permission mode falls back to the CLI's default, which asks the most.
func configArgs(config protocol.Object) []string {
	var args []string
	if mode := stringValue(config[ConfigPermissionMode]); mode != "" && mode != "default" {
		for _, m := range permissionModes {
			if m.id == mode {
				args = append(args, "--permission-mode", mode)
			}
		}
	}
	// The tool flags take a variable number of values; every flag after
	// them starts with "-", which ends the list.
	if tools := stringsValue(config[ConfigAllowedTools]); len(tools) > 0 {
		args = append(append(args, "--allowedTools"), tools...)
	}
	if tools := stringsValue(config[ConfigDisallowedTools]); len(tools) > 0 {
		args = append(append(args, "--disallowedTools"), tools...)
	}
	return args
}

func stringValue(v jsontext.Value) string {
	var s string
	if len(v) == 0 || json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// stringsValue reads a list of tool names, dropping empty ones and any
// that would read as a flag.
func stringsValue(v jsontext.Value) []string {
	var list []string
	if len(v) == 0 || json.Unmarshal(v, &list) != nil {
		return nil
	}
	out := list[:0]
	for _, s := range list {
		if s != "" && s[0] != '-' {
			out = append(out, s)
		}
	}
	return out
}
