package claude

import (
	"path/filepath"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// File edits: a call of the CLI's Write, Edit, MultiEdit or NotebookEdit
// that succeeded completes with the file's fileEdit content
// (plugins.FileEdit) after its text, which is what VS Code shows as the
// edit's chip and diff. The file before the call is read when the CLI
// asks to run it, as the answer allowing it goes (can_use_tool: the CLI
// waits for the answer, so it has not written yet). A call the CLI runs
// unasked is read when its input arrives, which may be after the CLI
// wrote: for it the CLI's own account of the file before
// (tool_use_result's originalFile, on the line with the result) is taken
// when it gives one. The file after is read at the result. A failed or
// denied call has no file edit.

// editTools names the CLI's tools that write a file, with the input
// member that names it.
var editTools = map[string]string{
	"Write":        "file_path",
	"Edit":         "file_path",
	"MultiEdit":    "file_path",
	"NotebookEdit": "notebook_path",
}

// editPath returns the file a call of tool name with input writes, made
// absolute against dir, or "" when the tool writes none or the input does
// not say yet.
func editPath(name string, input jsontext.Value, dir string) string {
	member, ok := editTools[name]
	if !ok || len(input) == 0 {
		return ""
	}
	var args map[string]jsontext.Value
	if json.Unmarshal(input, &args) != nil {
		return ""
	}
	var path string
	if v, ok := args[member]; !ok || json.Unmarshal(v, &path) != nil || path == "" {
		return ""
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return filepath.Clean(path)
}

// readBefore reads the file a call of name with input is about to write,
// nil for a call that writes none.
func readBefore(name string, input jsontext.Value, dir string) *plugins.FileVersion {
	path := editPath(name, input, dir)
	if path == "" {
		return nil
	}
	v := plugins.ReadFileVersion(path)
	return &v
}

// originalFile returns the file before the call as the CLI's
// tool_use_result tells it: its originalFile, null for a file the call
// created; ok is false when it does not say.
func originalFile(result jsontext.Value) (v plugins.FileVersion, ok bool) {
	if !isSet(result) {
		return v, false
	}
	var r map[string]jsontext.Value
	if json.Unmarshal(result, &r) != nil {
		return v, false
	}
	raw, ok := r["originalFile"]
	if !ok {
		return v, false
	}
	if !isSet(raw) {
		return plugins.FileVersion{}, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return v, false
	}
	return plugins.VersionOf([]byte(s)), true
}

// withFileEdit adds the fileEdit content of a call that succeeded to its
// result: the file before as known, the file at path as it is now.
// Notebooks' diff stats are left out: the protocol counts their cells,
// and the lines of a notebook's JSON are no count of those.
func withFileEdit(r protocol.ToolCallResult, name, path string, before *plugins.FileVersion) protocol.ToolCallResult {
	if !r.Success || path == "" || before == nil {
		return r
	}
	fe := plugins.FileEdit(path, *before, plugins.ReadFileVersion(path))
	if name == "NotebookEdit" {
		fe.Diff = nil
	}
	r.Content = append(r.Content, fe)
	return r
}
