package journal

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// A session's subject is the journal's prefix and one token: the session
// name in unpadded base64url. Its alphabet (letters, digits, '-' and '_')
// is all allowed in a NATS subject token, where a URI's '.', '*', '>' and
// spaces are not, and it decodes back to the exact name.
var tokenEncoding = base64.RawURLEncoding

// checkSession refuses names the journal cannot keep.
func checkSession(session string) error {
	if session == "" {
		return fmt.Errorf("%w: empty", ErrBadSession)
	}
	if len(session) > MaxSessionBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadSession, len(session), MaxSessionBytes)
	}
	return nil
}

// subject is the subject of a session's entries.
func (j *Journal) subject(session string) string {
	return j.cfg.Subject + "." + tokenEncoding.EncodeToString([]byte(session))
}

// sessionOf decodes the session of a subject of this journal.
func (j *Journal) sessionOf(subject string) (string, error) {
	token, ok := strings.CutPrefix(subject, j.cfg.Subject+".")
	if !ok {
		return "", fmt.Errorf("journal: subject outside the journal")
	}
	name, err := tokenEncoding.DecodeString(token)
	if err != nil {
		return "", fmt.Errorf("journal: subject token: %w", err)
	}
	return string(name), nil
}
