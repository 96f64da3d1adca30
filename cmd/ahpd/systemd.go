package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// Running under systemd (contrib/systemd): a socket it passes (socket
// activation, LISTEN_FDS) is served instead of --listen, and the service
// manager is told when ahpd is ready and when it begins to stop
// (Type=notify, NOTIFY_SOCKET). Without systemd both are nothing.

// activatedListener returns the stream socket systemd passed, or nil when
// it passed none. The variables naming them are unset, so that no agent
// ahpd starts takes them for its own.
func activatedListener() (net.Listener, error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("the sockets systemd passed: %w", err)
	}
	var found net.Listener
	for _, ln := range lns {
		switch {
		case ln == nil:
		case found == nil:
			found = ln
		default:
			_ = ln.Close()
			err = errors.New("systemd passed more than one socket: ahpd serves one (ListenStream= once in ahpd.socket)")
		}
	}
	if err != nil {
		_ = found.Close()
		return nil, err
	}
	return found, nil
}

// notifySystemd tells the service manager of a change of state
// (daemon.SdNotifyReady, daemon.SdNotifyStopping), when there is one.
func notifySystemd(state string, log *slog.Logger) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("could not tell systemd", "state", state, "err", err)
	}
}
