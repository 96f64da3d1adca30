package worktree

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The session config keys a tree's options come from.
const (
	KeyBranch          = "branch"
	KeyBranchPrefix    = "worktreeBranchPrefix"
	KeyIncludeFiles    = "worktreeIncludeFiles"
	KeySymlinkFolders  = "worktreeSymlinkFolders"
	KeyCreateNewBranch = "worktreeCreateNewBranch"
	KeyBranchTrack     = "worktreeBranchTrack"
)

// SpecFromConfig builds the Spec for a session's tree from its config
// values, as decoded from JSON. Each key is taken only in its own shape (a
// string, a boolean, a list of patterns); a value of any other shape leaves
// that option at its default, so a malformed config still makes a tree.
// Booleans are also taken as the strings "true" and "false", since clients
// send enum-like keys as strings.
func SpecFromConfig(dir, sessionID string, cfg map[string]any) Spec {
	s := Spec{Dir: dir, Name: sessionID}
	if v, ok := cfg[KeyBranch].(string); ok {
		s.Branch = v
	}
	if v, ok := cfg[KeyBranchPrefix].(string); ok {
		s.BranchPrefix = v
	}
	if v, ok := boolValue(cfg[KeyCreateNewBranch]); ok {
		s.CheckoutBranch = !v
	}
	if v, ok := boolValue(cfg[KeyBranchTrack]); ok {
		s.Track = v
	}
	s.IncludeFiles, _ = Patterns(cfg[KeyIncludeFiles])
	s.SymlinkFolders, _ = Patterns(cfg[KeySymlinkFolders])
	return s
}

func boolValue(v any) (value, ok bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		switch v {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

// Patterns reads the value of a pattern-list key (worktreeIncludeFiles,
// worktreeSymlinkFolders). It takes:
//
//   - a list whose every entry is a string ([]string, or []any from a JSON
//     decode): the list, without its blank entries;
//   - a single string: read as the list it spells. A string is one pattern,
//     unless it holds line breaks, when each non-blank line is one, as in a
//     .gitignore file. Commas do not split it: a pattern may contain one.
//   - raw JSON ([]byte, json.RawMessage or another byte-slice type) holding
//     either of the above.
//
// Anything else, including a list with a non-string entry, gives nil and
// false, and the caller keeps the default (no patterns). A missing value
// (nil) gives nil and true.
func Patterns(v any) ([]string, bool) {
	switch v := v.(type) {
	case nil:
		return nil, true
	case string:
		return splitPatterns(v), true
	case []string:
		return nonBlank(v), true
	case []any:
		list := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			list = append(list, s)
		}
		return nonBlank(list), true
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
		var decoded any
		if err := json.Unmarshal(rv.Bytes(), &decoded); err != nil {
			return nil, false
		}
		if _, isBytes := decoded.([]byte); isBytes {
			return nil, false // cannot happen with encoding/json; guards recursion
		}
		return Patterns(decoded)
	}
	return nil, false
}

func splitPatterns(s string) []string {
	if !strings.ContainsAny(s, "\r\n") {
		return nonBlank([]string{s})
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return nonBlank(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }))
}

func nonBlank(list []string) []string {
	var res []string
	for _, p := range list {
		if strings.TrimSpace(p) != "" {
			res = append(res, p)
		}
	}
	return res
}
