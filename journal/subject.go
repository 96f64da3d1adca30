package journal

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
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

// floorSubject is where the journal records the newest sequence it has
// dropped of a session to keep it within its budget. The session's token
// is a subject token of its own, so its entries' subject does not match.
func (j *Journal) floorSubject(session string) string {
	return j.subject(session) + ".floor"
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

// checkNames refuses a stream name or subject prefix NATS would not take
// as one name or a literal subject.
func checkNames(stream, prefix string) error {
	if len(stream) > 255 || strings.ContainsAny(stream, ".*>/\\ \t\r\n") {
		return errors.New("journal: stream name must be at most 255 characters without '.', '*', '>', '/', '\\' or spaces")
	}
	if len(prefix) > 255 || strings.ContainsAny(prefix, "*> \t\r\n") || slices.Contains(strings.Split(prefix, "."), "") {
		return errors.New("journal: subject prefix must be at most 255 characters of dot-separated tokens without '*', '>' or spaces")
	}
	return nil
}
