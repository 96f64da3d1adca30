package client

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The files a running ahpd keeps in its state directory for local
// clients.
const (
	// AddressFile holds the URL the daemon listens on (ws://host:port),
	// written when it starts listening and removed when it exits.
	AddressFile = "address"
	// TokenFile holds the connection token the daemon generated (mode
	// 0600).
	TokenFile = "connection-token"
)

// Endpoint is where a host listens and the token to present.
type Endpoint struct {
	URL   string
	Token string
	// Withheld, when set, is the state directory's token file, whose
	// token was not sent: it is the local daemon's, and goes only to the
	// address that daemon records (Home, "" when it records none), which
	// URL is not.
	Withheld string
	Home     string
}

// LocateOptions override what Locate finds. Each is optional; a field
// given wins over the environment, which wins over the state directory.
type LocateOptions struct {
	// URL is the host's address (ws://127.0.0.1:9187).
	URL string
	// Token is the token to present; TokenFile names a file holding it.
	Token     string
	TokenFile string
	// StateDir is the daemon's state directory; "" is DefaultStateDir.
	StateDir string
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
}

// ErrNoDaemon is wrapped by Locate when no address was given and the
// state directory records no running daemon.
var ErrNoDaemon = errors.New("no ahpd running")

// Locate finds the host to talk to: the URL from o.URL, else $AHPD_URL,
// else the address file of the daemon's state directory; the token from
// o.Token, o.TokenFile, $AHPD_TOKEN, else the state directory's token
// file, which is sent only to the address the state directory records:
// that token is the local daemon's, and another host given by URL gets
// none (Endpoint.Withheld says so). A missing token is no error (a daemon
// may ask none); a missing address is ErrNoDaemon, with what to do in
// the message.
func Locate(o LocateOptions) (Endpoint, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := o.StateDir
	stateDir := func() (string, error) {
		if dir != "" {
			return dir, nil
		}
		return DefaultStateDir(getenv)
	}
	var ep Endpoint
	home := func() (string, error) {
		d, err := stateDir()
		if err != nil {
			return "", err
		}
		data, err := os.ReadFile(filepath.Join(d, AddressFile))
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w (no %s in %s): start one with `ahpd`, or pass --url or set AHPD_URL", ErrNoDaemon, AddressFile, d)
		}
		if err != nil {
			return "", fmt.Errorf("reading the daemon's address: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	switch {
	case o.URL != "":
		ep.URL = o.URL
	case getenv("AHPD_URL") != "":
		ep.URL = getenv("AHPD_URL")
	default:
		var err error
		if ep.URL, err = home(); err != nil {
			return ep, err
		}
	}
	switch {
	case o.Token != "":
		ep.Token = o.Token
	case o.TokenFile != "":
		data, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return ep, fmt.Errorf("reading the token: %w", err)
		}
		ep.Token = strings.TrimSpace(string(data))
		if ep.Token == "" {
			return ep, fmt.Errorf("the token file %s is empty", o.TokenFile)
		}
	case getenv("AHPD_TOKEN") != "":
		ep.Token = getenv("AHPD_TOKEN")
	default:
		d, err := stateDir()
		if err != nil {
			return ep, err
		}
		path := filepath.Join(d, TokenFile)
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return ep, fmt.Errorf("reading the connection token: %w", err)
		}
		token := strings.TrimSpace(string(data))
		if token == "" {
			return ep, nil
		}
		at, _ := home()
		if at == "" || !SameAddress(ep.URL, at) {
			ep.Withheld, ep.Home = path, at
			return ep, nil
		}
		ep.Token = token
	}
	return ep, nil
}

// SameAddress reports whether two host addresses name the same listener:
// the same host and port, ws and http alike (wss and https), whatever
// the path or query.
func SameAddress(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" || ub.Host == "" {
		return false
	}
	secure := func(u *url.URL) (bool, bool) {
		switch strings.ToLower(u.Scheme) {
		case "ws", "http":
			return false, true
		case "wss", "https":
			return true, true
		}
		return false, false
	}
	sa, oka := secure(ua)
	sb, okb := secure(ub)
	port := func(u *url.URL, tls bool) string {
		if p := u.Port(); p != "" {
			return p
		}
		if tls {
			return "443"
		}
		return "80"
	}
	return oka && okb && sa == sb && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua, sa) == port(ub, sb)
}

// DefaultStateDir is ahpd's state directory: $XDG_STATE_HOME/ahpd, else
// ~/.local/state/ahpd. getenv reads the environment; nil is os.Getenv.
func DefaultStateDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if dir := getenv("XDG_STATE_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "ahpd"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no state directory: set --state-dir (%w)", err)
		}
	}
	return filepath.Join(home, ".local", "state", "ahpd"), nil
}
