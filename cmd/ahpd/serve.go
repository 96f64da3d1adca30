package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/automations/asowner"
	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/dashboard"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/httpapi"
	"github.com/ahpd/ahpd/internal/atomicfile"
	"github.com/ahpd/ahpd/plugins/agentproc"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
)

// serve runs the daemon until ctx ends or, with --stdio, stdin does.
func serve(ctx context.Context, cfg *config, stdin io.Reader, stdout, stderr io.Writer) error {
	// A reader of stdout or stderr that goes away is a peer closing, which
	// a write's EPIPE says, not a reason to die: asked for SIGPIPE, the Go
	// runtime no longer exits on it. (Ignoring it instead would leave it
	// ignored in every agent and command ahpd starts.)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	log, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	if cfg.listener, err = activatedListener(); err != nil {
		return err
	}
	if cfg.listener != nil {
		// Closed by the server that serves it, or here on a failed start.
		defer cfg.listener.Close()
		if cfg.Stdio {
			return errors.New("--stdio, and systemd passed a socket: ahpd serves one or the other")
		}
		// What the token and Host checks go by is where it listens.
		cfg.Listen = cfg.listener.Addr().String()
		log.Info("serving the socket systemd passed", "addr", cfg.Listen)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("making the state directory: %w", err)
	}
	checkStateDir(cfg.StateDir, log)
	auth, closeUsers, err := authenticator(cfg, log)
	if err != nil {
		return err
	}
	defer closeUsers()
	var kept string
	if !cfg.Stdio {
		if auth.ConnectionToken, kept, err = connectionToken(cfg, log); err != nil {
			return err
		}
	}
	backends, err := newBackends(cfg, log)
	if err != nil {
		return err
	}
	warnDefaultless(cfg, backends, log)
	stopNATS, err := startNATSNode(cfg, log)
	if err != nil {
		return err
	}
	// Stopped last, once the journal and the cluster have let it go.
	defer stopNATS()
	jr, err := openJournal(ctx, cfg, log)
	if err != nil {
		return err
	}
	if jr != nil {
		// Closed after the host, which writes to it until its Close ends.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := jr.Close(ctx); err != nil {
				log.Warn("the journal did not close cleanly", "err", err)
			}
		}()
	}
	member, leave, err := joinCluster(ctx, cfg, journalConfigOf(cfg, log), log)
	if err != nil {
		return err
	}
	// Left after the host closes, before the journal does.
	defer leave()
	hooks, closeHooks, err := openWebhooks(cfg, log)
	if err != nil {
		return err
	}
	// Closed once the host has, which tells them until its Close ends.
	defer closeHooks()
	apiMetrics := httpapi.NewMetrics()
	uiMetrics := dashboard.NewMetrics()
	h, err := host.New(host.Options{
		StateDir: cfg.StateDir,
		Sessions: cfg.Sessions,
		Journal:  jr,
		Cluster:  member,
		Backends: backends,
		// A session naming no provider runs on a real agent, or is refused.
		DefaultProvider: defaultProvider(cfg, backends),
		Logger:          log,
		Version:         version,
		Collectors:      []prometheus.Collector{apiMetrics.Collector(), uiMetrics.Collector()},
		// Minutes as a fraction: tests and demos sleep sessions in seconds.
		SleepAfter:           time.Duration(cfg.SleepAfterMinutes * float64(time.Minute)),
		ResidencyLimit:       cfg.SessionResidencyLimit,
		Auth:                 auth,
		WorktreesRoot:        cfg.WorktreesRoot,
		Limits:               cfg.Limits.host(),
		AgentProcesses:       agentproc.Running,
		ClientWindow:         cfg.ClientWindow,
		ConnectionsPerPerson: cfg.Budgets.Connections,
		AllowedRoots:         cfg.AllowedRoots,
		// What a session whose config sets neither gets (docs/PERMISSIONS.md).
		Permissions:  cfg.defaultPermissions,
		InputTimeout: cfg.defaultInputTimeout,
		// Pushed off the turns' path; see docs/CLUSTER.md.
		PushCheckpoints: cfg.Checkpoints.Push,
		Events:          hooks, // docs/WEBHOOKS.md
		Automations: host.AutomationOptions{Declared: declaredAutomations(cfg, auth), NewRunner: runAsOwner, Debounce: cfg.FileChangedDebounce,
			MaxPerOwner: cfg.Budgets.Automations, WatchShare: cfg.Budgets.WatchedFolders},
		Transcripts: host.Transcripts{
			Listers: backends.TranscriptListers(),
			Index:   filepath.Join(cfg.StateDir, "catalogue-index.json"),
		},
	})
	if err != nil {
		return err
	}
	if cfg.Stdio {
		return serveStdio(ctx, cfg, h, stdin, stdout, log)
	}
	api := httpapi.Options{Metrics: apiMetrics, MaxStreamsPerPerson: cfg.Budgets.EventStreams}
	if jr != nil {
		api.Answers = jr // a retry after a restart, or through another host, is answered as the first
	}
	ui := dashboard.Options{Metrics: uiMetrics, MaxLoginsPerPerson: cfg.Budgets.DashboardLogins, MaxLivePagesPerPerson: cfg.Budgets.DashboardLivePages}
	return serveWebSocket(ctx, cfg, h, member, auth, kept, api, ui, stdout, stderr, log)
}

func serveStdio(ctx context.Context, cfg *config, h *host.Host, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() { done <- h.ServeStdio(stdin, stdout) }()
	select {
	case err := <-done:
		return errors.Join(err, shutdown(h, cfg, log))
	case <-ctx.Done():
		err := shutdown(h, cfg, log)
		// The reader may be blocked on stdin, which nothing can interrupt;
		// the process is about to exit anyway.
		return err
	}
}

// serveWebSocket serves AHP on cfg.Listen, and the HTTP API under /v1/ and
// the dashboard under /ui/ behind the same token and Host checks; auth holds the connection token
// ("" for none) and kept is the file it is kept in, when ahpd made it; api
// has the HTTP API's metrics and where it keeps answers, ui the
// dashboard's metrics and budgets.
func serveWebSocket(ctx context.Context, cfg *config, h *host.Host, member *cluster.Member, auth *grants.Authenticator, kept string, api httpapi.Options, ui dashboard.Options, stdout, stderr io.Writer, log *slog.Logger) error {
	token := auth.ConnectionToken
	ln := cfg.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			_ = h.Close(context.Background())
			return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
	}
	handshake := cfg.Limits.host().WithDefaults().Handshake
	mux := http.NewServeMux()
	api.Host, api.Auth, api.Open, api.Listen, api.Logger = h, auth, token == "", ln.Addr().String(), log
	mux.Handle("/v1/", httpapi.New(api))
	ui.Host, ui.Auth, ui.Open, ui.Listen, ui.Logger = h, auth, token == "", ln.Addr().String(), log
	mux.Handle("/ui/", dashboard.New(ui))
	mux.Handle("/", h.Handler(token == "", ln.Addr().String()))
	handleHealth(mux, h, member)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: handshake,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if cfg.MetricsListen != "" {
		stop, err := serveMetrics(cfg, h, member, handshake, log)
		if err != nil {
			_ = srv.Close()
			<-served
			_ = h.Close(context.Background())
			return err
		}
		defer stop()
	}
	forget, err := recordAddress(cfg.StateDir, clientURL(ln.Addr()))
	if err != nil {
		// Clients on this machine then need --url; serving goes on.
		log.Warn("local clients will not find this daemon", "err", err)
		forget = func() {}
	}
	defer forget()
	if member != nil {
		// The other hosts learn where this one listens.
		if err := member.SetAddr(ctx, ln.Addr().String()); err != nil {
			log.Warn("could not tell the cluster where this host listens", "err", err)
		}
	}
	fmt.Fprintf(stdout, "ahpd listening on ws://%s\n", ln.Addr())
	if kept != "" {
		fmt.Fprint(stderr, connectLine(ln.Addr().String(), token, kept, isTerminal(stderr)))
	}
	fmt.Fprintf(stderr, "ahpd: the dashboard is at http://%s/ui/\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "stateDir", cfg.StateDir, "sessions", cfg.Sessions, "version", version)
	notifySystemd(daemon.SdNotifyReady, log)

	select {
	case <-ctx.Done():
	case err := <-served:
		_ = h.Close(context.Background())
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("shutting down")
	notifySystemd(daemon.SdNotifyStopping, log)
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = srv.Shutdown(stopCtx) // stop accepting; connections are the host's to end
	cancel()
	err = shutdown(h, cfg, log)
	_ = srv.Close()
	<-served
	return err
}

// connectLine tells the person who started ahpd how to connect, on a line
// of its own. The token is in it only when that person's terminal is
// where it goes: stderr sent to a file or a journal is a log, and a log
// never carries the token.
func connectLine(addr, token, kept string, terminal bool) string {
	if terminal {
		return fmt.Sprintf("ahpd: connect with ws://%s?tkn=%s (the token is kept in %s)\n", addr, token, kept) +
			fmt.Sprintf("ahpd: the dashboard: http://%s/ui/?tkn=%s\n", addr, token)
	}
	return fmt.Sprintf("ahpd: connect with ws://%s and the token kept in %s\n", addr, kept)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// checkStateDir warns of a state directory others may write to: they
// could change sessions, and read or replace the token.
func checkStateDir(dir string, log *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil {
		return
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		log.Warn("the state directory is writable by others: they can change sessions and the connection token; chmod go-w it", "dir", dir, "mode", fmt.Sprintf("%04o", perm))
	}
}

// serveMetrics serves /metrics and the health probes on cfg.MetricsListen,
// without a token: what they show is counts, and a scraper has none to
// give; with cfg.Pprof, the profiles too, which only that address serves.
// It returns what stops it.
func serveMetrics(cfg *config, h *host.Host, member *cluster.Member, handshake time.Duration, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics on %s: %w", cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h.MetricsHandler())
	handleHealth(mux, h, member)
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: handshake, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}

// shutdown lets running turns end within the grace period, then stops
// everything.
func shutdown(h *host.Host, cfg *config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	err := h.Close(ctx)
	if err != nil {
		log.Warn("shutdown finished with errors", "err", err)
	}
	log.Info("stopped")
	return nil
}

// connectionToken returns the token clients must present, or "" when none
// is asked. A host listening beyond loopback must be told explicitly; on
// loopback with nothing said, ahpd keeps a token of its own in the state
// directory, whose path it returns as kept.
func connectionToken(cfg *config, log *slog.Logger) (token, kept string, err error) {
	switch {
	case cfg.WithoutConnectionToken:
		log.Warn("serving without a connection token: anyone who can reach the address can run agents")
		return "", "", nil
	case cfg.ConnectionToken != "":
		return cfg.ConnectionToken, "", nil
	case cfg.ConnectionTokenFile != "":
		data, err := os.ReadFile(cfg.ConnectionTokenFile)
		if err != nil {
			return "", "", fmt.Errorf("reading the connection token: %w", err)
		}
		token := strings.TrimSpace(string(data))
		if token == "" {
			return "", "", fmt.Errorf("the connection token file %s is empty", cfg.ConnectionTokenFile)
		}
		return token, "", nil
	}
	if !loopback(cfg.Listen) {
		return "", "", fmt.Errorf("listening on %s, beyond this machine, needs --connection-token, --connection-token-file or --without-connection-token", cfg.Listen)
	}
	path := filepath.Join(cfg.StateDir, "connection-token")
	data, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(data)) != "" {
		return strings.TrimSpace(string(data)), path, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("reading the connection token: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(b)
	// Whole or not at all: a token cut short by a crash would lock out
	// every client that read it from the file.
	if err := atomicfile.Write(path, []byte(token+"\n"), &atomicfile.Options{Perm: 0o600}); err != nil {
		return "", "", fmt.Errorf("keeping the connection token: %w", err)
	}
	log.Info("generated a connection token", "file", path)
	return token, path, nil
}

// loopback reports whether addr listens only on this machine.
func loopback(addr string) bool {
	hostname, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if hostname == "localhost" {
		return true
	}
	ip := net.ParseIP(hostname)
	return ip != nil && ip.IsLoopback()
}

// authenticator names who connections act for: root with the connection
// token (set once it is known), a person with their own token when there
// is a users directory. The directory is re-read when its file changes,
// and the host then closes connections whose token it no longer holds.
func authenticator(cfg *config, log *slog.Logger) (*grants.Authenticator, func(), error) {
	hostname, _ := os.Hostname()
	a := &grants.Authenticator{Host: hostname}
	if cfg.Users == "" {
		return a, func() {}, nil
	}
	live, err := grants.Watch(cfg.Users, log)
	if err != nil {
		return nil, nil, fmt.Errorf("the users directory: %w", err)
	}
	a.Users = live
	return a, func() { _ = live.Close() }, nil
}

// newLogger is the daemon's log on w, of the level and format
// (--log-level, --log-format) asked.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// runAsOwner runs the host's automation runs as their owners
// (automations/asowner).
func runAsOwner(h host.RunnerHost) automations.Runner { return asowner.New(h) }
