package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	HeaderEvent     = "X-Ahpd-Event"     // the event's kind
	HeaderDelivery  = "X-Ahpd-Delivery"  // the event's id: the same on every retry
	HeaderTimestamp = "X-Ahpd-Timestamp" // this attempt's time, in Unix seconds
	HeaderSignature = "X-Ahpd-Signature" // sha256=<hex>, of the timestamp, ".", and the body
	HeaderAttempt   = "X-Ahpd-Attempt"   // 1 for the first attempt, 2 for the first retry, ...
)

// DefaultTolerance is how far from a receiver's clock Verify takes a
// delivery's timestamp to be: a delivery captured and sent again later is
// refused once it is older than that.
const DefaultTolerance = 5 * time.Minute

// Sign returns the X-Ahpd-Signature of a body sent at timestamp (the
// X-Ahpd-Timestamp header's value): "sha256=" and the hex of the
// HMAC-SHA256, under secret, of the timestamp, a ".", and the body. The
// timestamp is signed with the body so that a receiver can refuse an old
// delivery sent again.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("webhooks: the delivery is not signed")
	ErrBadSignature = errors.New("webhooks: the signature does not match: another secret, or a body changed on the way")
	ErrStale        = errors.New("webhooks: the timestamp is too far from now: an old delivery sent again, or a clock that is off")
)

// Verify checks a delivery as its receiver does: that its signature is
// the body's and timestamp's under secret, and that its timestamp is
// within tolerance of now (DefaultTolerance for 0). The body must be the
// bytes received, before any decoding. A receiver that has verified a
// delivery dedups it by its X-Ahpd-Delivery id.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sig, ts := h.Get(HeaderSignature), h.Get(HeaderTimestamp)
	if sig == "" || ts == "" {
		return ErrNoSignature
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return fmt.Errorf("%w (%s is not sha256=<hex>)", ErrBadSignature, HeaderSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%w (%s is not sha256=<hex>)", ErrBadSignature, HeaderSignature)
	}
	want, _ := hex.DecodeString(strings.TrimPrefix(Sign(secret, ts, body), "sha256="))
	if !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w (%s is not a number of seconds)", ErrStale, HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}
