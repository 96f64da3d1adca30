package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxNameLen bounds a tree's name, which is both a folder name and the last
// part of a branch name; session ids are far shorter, so only hostile or
// broken input is cut.
const maxNameLen = 64

// TreeName derives the name of a session's tree (its folder and the end of
// its branch) from the session id. The result is safe as a path element and
// as a branch name: only ASCII letters, digits, '.', '_' and '-', no leading
// '.' or '-', no "..", no trailing '.' or ".lock", at most 64 bytes. When the
// id had to be changed to get there, eight hex digits of its SHA-256 are
// appended, so two ids that clean up alike still get different names.
func TreeName(id string) string {
	var b strings.Builder
	dash := false
	for _, r := range id {
		ok := r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if !ok {
			r = '-'
		}
		// Runs of replaced characters become one dash, so "a  b" is "a-b"
		// rather than "a--b".
		if r == '-' && dash && !ok {
			continue
		}
		dash = r == '-'
		b.WriteRune(r)
	}
	name := tidyName(b.String(), maxNameLen)
	if name == id && name != "" {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	suffix := hex.EncodeToString(sum[:4])
	name = strings.TrimRight(tidyName(name, maxNameLen-len(suffix)-1), "-")
	if name == "" {
		return "tree-" + suffix
	}
	return name + "-" + suffix
}

// tidyName applies the rules TreeName promises to a string already reduced
// to the allowed characters, cutting it to at most n bytes.
func tidyName(s string, n int) string {
	for strings.Contains(s, "..") {
		s = strings.ReplaceAll(s, "..", ".")
	}
	if len(s) > n {
		s = s[:n]
	}
	for {
		t := strings.TrimLeft(s, ".-")
		t = strings.TrimRight(t, ".")
		t = strings.TrimSuffix(t, ".lock")
		if t == s {
			return s
		}
		s = t
	}
}
