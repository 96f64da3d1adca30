package webhooks

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ahpd/ahpd/events"
)

// Spec is one webhook as the config file's webhooks: list spells it.
// Check turns a list of them into Webhooks, or says what is wrong.
type Spec struct {
	// Name is how the log and the metrics name the webhook; left out, its
	// URL's host. Pending deliveries are kept across restarts by it.
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Events are the kinds it is sent (events.Kinds).
	Events []string `yaml:"events"`
	// Secret signs each delivery; SecretFile names a file holding it
	// instead. Unsigned says, explicitly, that deliveries go unsigned.
	Secret     string `yaml:"secret"`
	SecretFile string `yaml:"secretFile"`
	Unsigned   bool   `yaml:"unsigned"`
	// AllowInsecure allows plain http beyond loopback, and addresses
	// that are otherwise refused (link-local, unspecified).
	AllowInsecure bool `yaml:"allowInsecure"`
	// RetryFor is how long after its event a delivery is still retried;
	// Timeout bounds each attempt; MaxPending bounds the deliveries
	// waiting. Left out (0), the defaults.
	RetryFor   time.Duration `yaml:"retryFor"`
	Timeout    time.Duration `yaml:"timeout"`
	MaxPending int           `yaml:"maxPending"`
}

// Webhook is a checked webhook: where its events go and how.
type Webhook struct {
	Name   string
	URL    string
	Events []events.Kind
	// Secret signs deliveries; nil sends them unsigned.
	Secret        Secret
	AllowInsecure bool
	RetryFor      time.Duration
	Timeout       time.Duration
	MaxPending    int
}

// String names the webhook by its name, scheme and host: a Webhook
// printed, or logged, shows neither its secret nor its URL's path.
func (w Webhook) String() string { return "webhook " + w.Name + " (" + w.Shown() + ")" }

// GoString is String, for %#v.
func (w Webhook) GoString() string { return w.String() }

// LogValue is String, for slog.
func (w Webhook) LogValue() slog.Value { return slog.StringValue(w.String()) }

// wants reports whether the webhook is sent events of kind k.
func (w *Webhook) wants(k events.Kind) bool { return slices.Contains(w.Events, k) }

// Shown is the webhook's URL as the log and errors show it: its scheme
// and host only. Receivers often take a token in the path (or query),
// which is as secret as the signing key.
func (w *Webhook) Shown() string { return shownURL(w.URL) }

func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL)"
	}
	return u.Scheme + "://" + u.Host
}

// Secret is a signing key. It prints as [redacted], so that no log or
// error shows it by mistake.
type Secret []byte

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return "[redacted]" }

// MarshalText keeps it out of JSON and YAML too.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// The defaults and bounds of a webhook's settings.
const (
	DefaultRetryFor   = time.Hour
	DefaultTimeout    = 10 * time.Second
	DefaultMaxPending = 1000

	minRetryFor, maxRetryFor = time.Minute, 7 * 24 * time.Hour
	minTimeout, maxTimeout   = time.Second, time.Minute
	maxMaxPending            = 100_000

	// MinSecret is the shortest signing key taken: a short one can be
	// guessed from the signatures it makes.
	MinSecret = 16
	maxSecret = 1024
	maxURL    = 2048
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Check checks the config file's webhooks and returns them ready to use.
// An error names the entry and the field as the file spells them, e.g.
// webhooks[1].url: ..., and never quotes a secret or a URL's path.
func Check(specs []Spec) ([]Webhook, error) {
	out := make([]Webhook, 0, len(specs))
	names := map[string]int{}
	for i, s := range specs {
		w, err := check(s)
		if err != nil {
			return nil, fmt.Errorf("webhooks[%d]%s", i, err)
		}
		if j, ok := names[w.Name]; ok {
			if s.Name == "" {
				return nil, fmt.Errorf("webhooks[%d]: a second webhook named %q, after webhooks[%d] (its URL's host): give each a name", i, w.Name, j)
			}
			return nil, fmt.Errorf("webhooks[%d].name: %q is the name of webhooks[%d] too: names are unique", i, w.Name, j)
		}
		names[w.Name] = i
		out = append(out, w)
	}
	return out, nil
}

// check checks one webhook; an error starts with the field (".url: ...")
// or ": " for the entry as a whole.
func check(s Spec) (Webhook, error) {
	w := Webhook{AllowInsecure: s.AllowInsecure}
	u, err := checkURL(s.URL, s.AllowInsecure)
	if err != nil {
		return w, fmt.Errorf(".url: %v", err)
	}
	w.URL = u.String()
	w.Name = s.Name
	if w.Name == "" {
		w.Name = nameOf(u)
	} else if !namePattern.MatchString(w.Name) {
		return w, fmt.Errorf(".name: %q: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
	}
	if len(s.Events) == 0 {
		return w, fmt.Errorf(".events: none: name the events it is sent, of %s", kindList())
	}
	for j, e := range s.Events {
		k := events.Kind(e)
		if !slices.Contains(events.Kinds(), k) {
			return w, fmt.Errorf(".events[%d]: %q is no event: they are %s", j, e, kindList())
		}
		if !slices.Contains(w.Events, k) {
			w.Events = append(w.Events, k)
		}
	}
	if w.Secret, err = secretOf(s); err != nil {
		return w, err
	}
	if w.RetryFor, err = within("retryFor", s.RetryFor, DefaultRetryFor, minRetryFor, maxRetryFor); err != nil {
		return w, err
	}
	if w.Timeout, err = within("timeout", s.Timeout, DefaultTimeout, minTimeout, maxTimeout); err != nil {
		return w, err
	}
	switch {
	case s.MaxPending == 0:
		w.MaxPending = DefaultMaxPending
	case s.MaxPending < 0 || s.MaxPending > maxMaxPending:
		return w, fmt.Errorf(".maxPending: %d: from 1 to %d (left out, %d)", s.MaxPending, maxMaxPending, DefaultMaxPending)
	default:
		w.MaxPending = s.MaxPending
	}
	return w, nil
}

func kindList() string {
	var names []string
	for _, k := range events.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// nameOf is a webhook's default name: its URL's host, as a name may
// spell it.
func nameOf(u *url.URL) string {
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '-'
	}, u.Hostname())
	name = strings.Trim(name, "-._")
	if len(name) > 64 {
		name = name[:64]
	}
	if name == "" {
		name = "webhook"
	}
	return name
}

// secretOf reads the webhook's signing key, or makes sure it is meant to
// go unsigned.
func secretOf(s Spec) (Secret, error) {
	switch {
	case s.Unsigned && (s.Secret != "" || s.SecretFile != ""):
		return nil, errors.New(": unsigned: true with a secret: give one or the other")
	case s.Secret != "" && s.SecretFile != "":
		return nil, errors.New(": secret and secretFile: give one of them")
	case s.Unsigned:
		return nil, nil
	case s.Secret == "" && s.SecretFile == "":
		return nil, fmt.Errorf(": no secret: give secret or secretFile (at least %d bytes; `openssl rand -hex 32` makes one), or unsigned: true for a receiver that checks no signature", MinSecret)
	}
	field, key := ".secret", s.Secret
	if s.SecretFile != "" {
		data, err := os.ReadFile(s.SecretFile)
		if err != nil {
			return nil, fmt.Errorf(".secretFile: %v", err)
		}
		field, key = ".secretFile", strings.TrimSpace(string(data))
	}
	switch {
	case len(key) < MinSecret:
		return nil, fmt.Errorf("%s: %d bytes: a secret has at least %d", field, len(key), MinSecret)
	case len(key) > maxSecret:
		return nil, fmt.Errorf("%s: %d bytes: a secret has at most %d", field, len(key), maxSecret)
	}
	return Secret(key), nil
}

func within(field string, d, def, lo, hi time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < lo || d > hi:
		return 0, fmt.Errorf(".%s: %v: from %v to %v (left out, %v)", field, d, lo, hi, def)
	}
	return d, nil
}

// checkURL takes https anywhere, and plain http only to this machine
// (loopback), unless allowInsecure: a delivery over http beyond it can be
// read and changed on the way, and a private address over http is
// usually something inside a network that config should not reach by
// accident. Link-local and unspecified addresses (cloud metadata
// services answer on 169.254.169.254) are refused over either, unless
// allowInsecure. Errors show the URL's scheme and host, never its path.
func checkURL(raw string, allowInsecure bool) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("none: where the events are posted, https://... (or http://127.0.0.1:PORT/... on this machine)")
	}
	if len(raw) > maxURL {
		return nil, fmt.Errorf("%d bytes: at most %d", len(raw), maxURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	shown := shownURL(raw)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s: https:// or http:// only", protocolOf(u))
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("no host")
	case u.User != nil:
		return nil, fmt.Errorf("%s carries credentials (user:password@): sign deliveries with secret instead, or put the receiver's token in the path", shown)
	case u.Fragment != "":
		return nil, errors.New("a #fragment is never sent: leave it out")
	}
	host := u.Hostname()
	ip := net.ParseIP(strings.SplitN(host, "%", 2)[0])
	if allowInsecure {
		return u, nil
	}
	if ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()) {
		return nil, fmt.Errorf("%s names a link-local, multicast or unspecified address, which is refused (cloud metadata services answer there); set allowInsecure: true if you mean it", shown)
	}
	if u.Scheme == "https" || host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return u, nil
	}
	if ip != nil && ip.IsPrivate() {
		return nil, fmt.Errorf("%s names a private address over plain http: use https, or set allowInsecure: true", shown)
	}
	return nil, fmt.Errorf("%s is plain http beyond this machine: use https (http is taken for 127.0.0.1, [::1] and localhost), or set allowInsecure: true", shown)
}

func protocolOf(u *url.URL) string {
	if u.Scheme == "" {
		return "no scheme"
	}
	return fmt.Sprintf("scheme %q", u.Scheme)
}
