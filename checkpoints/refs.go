package checkpoints

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// refRoot is where every session's refs live.
const refRoot = "refs/agents/"

const (
	// maxIDLen bounds the readable part of a session's ref component: loose
	// refs are files, and file names have length limits.
	maxIDLen = 100
	// hashSep and hashLen shape the suffix that marks an id that had to be
	// rewritten: "--" then 16 hex digits of the id's SHA-256.
	hashSep = "--"
	hashLen = 16
)

// RefPrefix returns the prefix of every checkpoint ref of a session,
// "refs/agents/<id>/checkpoints/", with a trailing slash.
//
// The id is used as it is when it is already a safe, unambiguous ref name
// component: non-empty, at most 100 bytes of [A-Za-z0-9._-], not starting
// with '.', without "..", and not ending in '.' or ".lock". Anything else is
// rewritten: characters outside that set become '-', dots that git would
// refuse become '-', the result is cut to 100 bytes, and "--" plus 16 hex
// digits of the SHA-256 of the original id are appended. An id that merely
// looks like a rewritten one (it ends in "--" and 16 lowercase hex digits)
// is rewritten too, so two different ids never share a prefix.
func RefPrefix(sessionID string) string {
	return sessionRoot(sessionID) + "checkpoints/"
}

// sessionRoot returns "refs/agents/<id>/", under which all of a session's
// refs live; Delete removes exactly this hierarchy.
func sessionRoot(sessionID string) string {
	return refRoot + sessionComponent(sessionID) + "/"
}

// turnsPrefix returns the prefix of a session's turn checkpoints.
func turnsPrefix(sessionID string) string {
	return RefPrefix(sessionID) + "turn/"
}

// startsPrefix returns the prefix of a session's start checkpoints.
func startsPrefix(sessionID string) string {
	return RefPrefix(sessionID) + "start/"
}

// startRef returns the ref of the checkpoint a turn started from, checked
// to be a valid ref name.
func startRef(sessionID string, turn int) (string, error) {
	if turn < 1 {
		return "", fmt.Errorf("no start checkpoint for turn %d", turn)
	}
	ref := startsPrefix(sessionID) + strconv.Itoa(turn)
	if err := checkRefName(ref); err != nil {
		return "", err
	}
	return ref, nil
}

// turnRef returns the ref of one turn's checkpoint, checked to be a valid
// ref name.
func turnRef(sessionID string, turn int) (string, error) {
	if turn < 0 {
		return "", fmt.Errorf("negative turn %d", turn)
	}
	ref := turnsPrefix(sessionID) + strconv.Itoa(turn)
	if err := checkRefName(ref); err != nil {
		return "", err
	}
	return ref, nil
}

// sessionComponent maps a session id to a single ref name component.
func sessionComponent(id string) string {
	if verbatimOK(id) {
		return id
	}
	b := make([]byte, 0, len(id)+len(hashSep)+hashLen)
	for _, c := range id {
		if c < 0x80 && safeByte(byte(c)) {
			b = append(b, byte(c))
		} else {
			b = append(b, '-')
		}
		if len(b) == maxIDLen {
			break
		}
	}
	// Dots are the only kept character with positional rules: no leading
	// dot and no "..". A trailing dot or ".lock" is harmless once the hash
	// suffix follows.
	for i := range b {
		if b[i] == '.' && (i == 0 || b[i-1] == '.') {
			b[i] = '-'
		}
	}
	sum := sha256.Sum256([]byte(id))
	b = append(b, hashSep...)
	b = append(b, hex.EncodeToString(sum[:])[:hashLen]...)
	return string(b)
}

// verbatimOK reports whether id can be used unchanged as a ref component.
func verbatimOK(id string) bool {
	if id == "" || len(id) > maxIDLen || id[0] == '.' ||
		strings.Contains(id, "..") || strings.HasSuffix(id, ".") ||
		strings.HasSuffix(id, ".lock") || looksHashed(id) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !safeByte(id[i]) {
			return false
		}
	}
	return true
}

// looksHashed reports whether s ends like a rewritten id.
func looksHashed(s string) bool {
	n := len(hashSep) + hashLen
	if len(s) < n || !strings.HasSuffix(s[:len(s)-hashLen], hashSep) {
		return false
	}
	for _, c := range []byte(s[len(s)-hashLen:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// checkSessionID rejects the one id that cannot name a session.
func checkSessionID(id string) error {
	if id == "" {
		return errors.New("checkpoints: empty session id")
	}
	return nil
}

var errBadRef = errors.New("invalid ref name")

// checkRefName checks a ref name this package built before it reaches git.
// It applies git's rules (git-check-ref-format(1)) over a narrower alphabet,
// [A-Za-z0-9._/-], so it is at least as strict as `git check-ref-format`
// without spending a process on every capture. Everything the alphabet
// excludes (controls, space, ~ ^ : ? * [ \ and "@{") needs no rule of its
// own.
func checkRefName(ref string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", errBadRef, ref, why) }
	if !strings.HasPrefix(ref, "refs/") {
		return bad("not under refs/")
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; c != '/' && !safeByte(c) {
			return bad(fmt.Sprintf("character %q", c))
		}
	}
	if strings.Contains(ref, "..") {
		return bad(`contains ".."`)
	}
	if strings.HasSuffix(ref, ".") {
		return bad(`ends with "."`)
	}
	for _, comp := range strings.Split(ref, "/") {
		switch {
		case comp == "":
			return bad("empty component")
		case comp[0] == '.':
			return bad(`component starts with "."`)
		case strings.HasSuffix(comp, ".lock"):
			return bad(`component ends with ".lock"`)
		}
	}
	return nil
}

// parseTurn returns N for a ref "<prefix>N", accepting only the canonical
// decimal form this package writes.
func parseTurn(ref, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(ref, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}
