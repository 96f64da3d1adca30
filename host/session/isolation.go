package session

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

const KeyIsolation = "isolation"

const IsolationTree = "worktree"

// hostKeys are the isolation keys in the order a client draws them, after
// isolation itself and the backend's keys.
var hostKeys = []string{
	KeyIsolation, worktree.KeyBranch, worktree.KeyBranchPrefix, worktree.KeyIncludeFiles,
	worktree.KeySymlinkFolders, worktree.KeyCreateNewBranch, worktree.KeyBranchTrack, KeyScope, KeySharing,
}

func IsHostKey(k string) bool {
	if IsPermissionKey(k) {
		return true
	}
	for _, h := range hostKeys {
		if h == k {
			return true
		}
	}
	return false
}

// HostValue returns the value given for a host key in the shape its
// property takes, and whether there is one: a pattern key takes a list of
// strings, or a single string read as the list it spells.
func HostValue(key string, p protocol.SessionConfigPropertySchema, v jsontext.Value) (jsontext.Value, bool) {
	if IsPermissionKey(key) {
		out, err := permissionValue(key, v)
		return out, err == nil
	}
	if key == worktree.KeyIncludeFiles || key == worktree.KeySymlinkFolders {
		list, ok := worktree.Patterns([]byte(v))
		if !ok {
			return nil, false
		}
		if list == nil {
			list = []string{}
		}
		out, err := json.Marshal(list)
		return out, err == nil
	}
	return v, Fits(p, v)
}

func QuoteJSON(s string) jsontext.Value {
	v, _ := jsontext.AppendQuote(nil, s)
	return v
}

// StringValue returns the string a JSON value holds, or "".
func StringValue(v jsontext.Value) string {
	var s string
	if v == nil || json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}
