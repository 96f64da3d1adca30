package grants

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// TokenPrefix starts every personal token, so a token is recognizable in a
// shell history or a secret scanner and cannot be mistaken for a
// connection token.
const TokenPrefix = "ahpu_"

// newToken returns a fresh personal token: the prefix and 32 random bytes
// in unpadded base64url.
func newToken() string {
	var b [32]byte
	rand.Read(b[:]) // never returns an error; it crashes the program first
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashToken returns the lower-case hex SHA-256 of a token, the only form in
// which a token is kept.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// fingerprintLen is how many hex digits of a token's hash name it in
// listings and in Revoke: enough to tell a user's tokens apart, and no
// help to anyone guessing the token.
const fingerprintLen = 12

// validHash reports whether s is a lower-case hex SHA-256.
func validHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

var (
	// tokenLike matches anything that might be a personal token.
	tokenLike = regexp.MustCompile(regexp.QuoteMeta(TokenPrefix) + `[A-Za-z0-9_\-]*`)
	// quotedValue matches the values yaml quotes in its messages.
	quotedValue = regexp.MustCompile("`[^`]*`")
)

// redact removes from a message anything that could be a secret somebody
// put where it does not belong: token-shaped words and the values the
// YAML decoder quotes back.
func redact(msg string) string {
	msg = quotedValue.ReplaceAllString(msg, "`…`")
	return tokenLike.ReplaceAllString(msg, TokenPrefix+"…")
}

// quote quotes a name for a message, unless it looks like a token.
func quote(id string) string {
	if strings.Contains(id, TokenPrefix) {
		return `"` + TokenPrefix + `…"`
	}
	return strconv.Quote(id)
}
