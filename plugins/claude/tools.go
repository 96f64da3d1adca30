package claude

import (
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// denyMessage is what the CLI is told when the user refuses a tool call.
// It ends up in the transcript as the call's result, which is how a call
// read back is known to have been denied rather than to have failed.
const denyMessage = "The user denied this tool call."

// cancelMessage is what the CLI is told about a permission prompt the
// turn's end left unanswered.
const cancelMessage = "The turn was cancelled before the user answered."

// toolText is how a tool call reads to people: the tool's name, what
// the call will do, and what it did.
type toolText struct {
	display    string
	invocation string // Markdown
	pastTense  string // Markdown
}

// describeTool returns how a call of the CLI's tool name with input
// reads. Paths inside dir are shown relative to it. input may be empty
// while the call is still streaming.
func describeTool(name string, input jsontext.Value, dir string) toolText {
	var args map[string]jsontext.Value
	if len(input) > 0 {
		json.Unmarshal(input, &args)
	}
	arg := func(key string) string {
		var s string
		if v, ok := args[key]; ok {
			json.Unmarshal(v, &s)
		}
		return s
	}
	path := func(key string) string { return code(relPath(arg(key), dir)) }
	// with words a call that does verb to object, or to noun when the
	// input does not say yet.
	with := func(display, verb, past, object, noun string) toolText {
		if object == "" {
			object = noun
		}
		return toolText{display, verb + " " + object, past + " " + object}
	}

	switch name {
	case "Bash":
		return with("Run command", "Run", "Ran", code(arg("command")), "a command")
	case "Write":
		return with("Write file", "Write", "Wrote", path("file_path"), "a file")
	case "Edit", "MultiEdit":
		return with("Edit file", "Edit", "Edited", path("file_path"), "a file")
	case "NotebookEdit":
		return with("Edit notebook", "Edit", "Edited", path("notebook_path"), "a notebook")
	case "Read":
		return with("Read file", "Read", "Read", path("file_path"), "a file")
	case "Glob":
		return with("Find files", "Find files matching", "Found files matching", code(arg("pattern")), "a pattern")
	case "Grep":
		return with("Search", "Search for", "Searched for", code(arg("pattern")), "a pattern")
	case "WebFetch":
		return with("Fetch", "Fetch", "Fetched", arg("url"), "a web page")
	case "WebSearch":
		return with("Web search", "Search the web for", "Searched the web for", code(arg("query")), "something")
	case "Task", "Agent":
		return with("Agent", "Run an agent:", "Ran an agent:", firstLine(arg("description")), "a task")
	case "TodoWrite", "TaskCreate", "TaskUpdate":
		return toolText{"Update tasks", "Update the task list", "Updated the task list"}
	}
	display := name
	if server, tool, ok := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__"); ok && strings.HasPrefix(name, "mcp__") {
		display = server + ": " + tool
	}
	return toolText{display, "Use " + code(display), "Used " + code(display)}
}

// toolCall returns the plugins.ToolCall of a call of the CLI's tool.
func toolCall(id, name string, input jsontext.Value, dir string) plugins.ToolCall {
	text := describeTool(name, input, dir)
	kind, paths := toolKind(name, input)
	call := plugins.ToolCall{
		ID:          id,
		Name:        name,
		DisplayName: text.display,
		Invocation:  protocol.Markdown(text.invocation),
		Kind:        kind,
		Paths:       paths,
	}
	if len(input) > 0 {
		call.Input = string(input)
	}
	return call
}

// toolKinds maps the CLI's tools to the kinds permission rules name, and
// names the input member holding the path each one touches. A search
// without a path searches the working directory.
var toolKinds = map[string]struct{ kind, path string }{
	"Write":        {plugins.KindEdit, "file_path"},
	"Edit":         {plugins.KindEdit, "file_path"},
	"MultiEdit":    {plugins.KindEdit, "file_path"},
	"NotebookEdit": {plugins.KindEdit, "notebook_path"},
	"Read":         {plugins.KindRead, "file_path"},
	"NotebookRead": {plugins.KindRead, "notebook_path"},
	"LS":           {plugins.KindRead, "path"},
	"Glob":         {plugins.KindSearch, "path"},
	"Grep":         {plugins.KindSearch, "path"},
	"Bash":         {plugins.KindExecute, ""},
	"BashOutput":   {plugins.KindExecute, ""},
	"KillShell":    {plugins.KindExecute, ""},
	"KillBash":     {plugins.KindExecute, ""},
	"WebFetch":     {plugins.KindFetch, ""},
	"WebSearch":    {plugins.KindFetch, ""},
}

// toolKind returns the kind of the CLI's tool name and the paths its
// input names.
func toolKind(name string, input jsontext.Value) (string, []string) {
	k, ok := toolKinds[name]
	if !ok {
		return plugins.KindOther, nil
	}
	if k.path == "" {
		return k.kind, nil
	}
	var args map[string]jsontext.Value
	if len(input) > 0 {
		json.Unmarshal(input, &args)
	}
	var p string
	if v, ok := args[k.path]; ok {
		json.Unmarshal(v, &p)
	}
	switch {
	case p != "":
		return k.kind, []string{p}
	case k.kind == plugins.KindSearch || name == "LS":
		return k.kind, []string{"."}
	}
	return k.kind, nil
}

// toolResult returns what a tool_result block says of a call of tool
// name with input.
func toolResult(name string, input jsontext.Value, dir string, res contentBlock) protocol.ToolCallResult {
	text := describeTool(name, input, dir)
	out := res.Content.text()
	r := protocol.ToolCallResult{
		Success:          !res.IsError,
		PastTenseMessage: protocol.Markdown(text.pastTense),
	}
	if out != "" {
		r.Content = []protocol.ToolResultContent{&protocol.ToolResultTextContent{Text: out}}
	}
	if res.IsError {
		r.PastTenseMessage = protocol.Markdown("Failed: " + text.invocation)
		msg := out
		if msg == "" {
			msg = "the tool failed"
		}
		r.Error = &protocol.ToolError{Message: msg}
	}
	return r
}

// relPath shows path relative to dir when it lies inside it.
func relPath(path, dir string) string {
	if path == "" || dir == "" || !filepath.IsAbs(path) {
		return path
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}

// code returns s as a Markdown code span, fenced with more backticks than
// any run inside it. Only the first line is shown, shortened.
func code(s string) string {
	s = firstLine(s)
	if s == "" {
		return ""
	}
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// maxShown bounds the text of a call's argument shown in its messages.
const maxShown = 120

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = strings.TrimSpace(s[:i]), true
	}
	if r := []rune(s); len(r) > maxShown {
		s, cut = string(r[:maxShown]), true
	}
	if cut {
		s += "…"
	}
	return s
}

// rejectedPrefix starts the result the CLI records for a call it did not
// run because the user said no in its own prompt, or interrupted the
// turn while it asked.
const rejectedPrefix = "The user doesn't want to proceed with this tool use"

// denied reports whether a tool result is the record of a call refused
// through ahpd (by the user, or by the session's permissions), and rejected whether it is one the CLI did not run for
// the user's sake.
func denied(res contentBlock) bool {
	text := strings.TrimSpace(res.Content.text())
	return res.IsError && (text == denyMessage || strings.HasPrefix(text, plugins.PolicyDenied))
}

func rejected(res contentBlock) bool {
	return res.IsError && strings.HasPrefix(strings.TrimSpace(res.Content.text()), rejectedPrefix)
}
