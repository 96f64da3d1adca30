package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/ahpd/ahpd/journal"
)

// natsConfig names the NATS the journal is kept in; no URL runs NATS in
// the daemon, with no listener (docs/JOURNAL.md).
type natsConfig struct {
	URL       string `yaml:"url"`
	CredsFile string `yaml:"credsFile"`
	User      string `yaml:"user"`
	Password  string `yaml:"password"`
	Token     string `yaml:"token"`
	// NKeySeedFile is this host's own NATS key, as `ahpd cluster
	// credentials` writes it (natscreds.go).
	NKeySeedFile string `yaml:"nkeySeedFile"`
	// TLS secures the connections to NATS, and the daemon's node's
	// client and route ports.
	TLS natsTLSConfig `yaml:"tls"`
	// Node runs a NATS node in the daemon that other daemons join
	// (natsnode.go).
	Node natsNodeConfig `yaml:"node"`
}

// natsTLSConfig is TLS for NATS: the CA that signed the nodes' and hosts'
// certificates, and this host's certificate and key (PEM files).
type natsTLSConfig struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// journalConfig is how long the journal keeps what.
type journalConfig struct {
	// MaxAge drops entries older than it; 0 keeps them until the session
	// is disposed of.
	MaxAge time.Duration `yaml:"maxAge"`
	// MaxBytesPerSession bounds what one session's journal keeps, its
	// oldest entries going first; 0 sets no bound.
	MaxBytesPerSession int64 `yaml:"maxBytesPerSession"`
}

// Retention by default: a month, and 64 MiB a session.
const (
	defaultJournalAge   = 30 * 24 * time.Hour
	defaultJournalBytes = 64 << 20
)

// checkJournal refuses journal settings that cannot work, before anything
// starts.
func checkJournal(cfg *config) error {
	if cfg.Journal.MaxAge < 0 || cfg.Journal.MaxBytesPerSession < 0 {
		return errors.New("config file: journal: maxAge and maxBytesPerSession must not be negative (0 turns each off)")
	}
	if cfg.NATS.URL == "" && cfg.NATS.Node.Listen == "" {
		if cfg.NATS.CredsFile != "" || cfg.NATS.User != "" || cfg.NATS.Password != "" || cfg.NATS.Token != "" ||
			cfg.NATS.NKeySeedFile != "" || cfg.NATS.TLS != (natsTLSConfig{}) {
			return errors.New("config file: nats: credentials without a url: the embedded NATS needs none")
		}
		return nil
	}
	if cfg.NATS.URL == "" {
		return nil // the daemon's own node
	}
	if err := checkNATSTLS(cfg.NATS.TLS, false); err != nil {
		return err
	}
	for _, u := range strings.Split(cfg.NATS.URL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" {
			return fmt.Errorf("--nats: %q is not a NATS URL (want nats://host:port, comma-separated for a cluster)", limitText(u, 100))
		}
	}
	return nil
}

// openJournal opens the journal the config names: none for sessions kept
// in memory, an embedded NATS under the state directory by default, or
// the NATS at --nats.
func openJournal(ctx context.Context, cfg *config, log *slog.Logger) (*journal.Journal, error) {
	if cfg.Sessions == "memory" && cfg.NATS.URL == "" {
		return nil, nil // nothing else of them is kept either
	}
	jc := journalConfigOf(cfg, log)
	if jc.URL == "" {
		jc.Dir = filepath.Join(cfg.StateDir, "journal")
	}
	j, err := journal.Open(ctx, jc)
	if err != nil {
		where := jc.Dir
		if jc.URL != "" {
			where = "NATS at " + jc.URL
		}
		return nil, fmt.Errorf("opening the journal (%s): %w", where, err)
	}
	return j, nil
}

// journalConfigOf is the journal's config from the daemon's: where NATS
// is and with what credentials, and how long entries are kept.
func journalConfigOf(cfg *config, log *slog.Logger) journal.Config {
	user, password, token := cfg.NATS.User, cfg.NATS.Password, cfg.NATS.Token
	if len(cfg.NATS.Node.Hosts) > 0 {
		user, password, token = "", "", "" // the routes' alone: this host goes in by its key
	}
	return journal.Config{
		URL: cfg.NATS.URL, CredsFile: cfg.NATS.CredsFile, User: user, Password: password, Token: token,
		NKeySeedFile: cfg.NATS.NKeySeedFile, TLSCA: cfg.NATS.TLS.CA, TLSCert: cfg.NATS.TLS.Cert, TLSKey: cfg.NATS.TLS.Key,
		MaxAge: cfg.Journal.MaxAge, MaxBytesPerSession: cfg.Journal.MaxBytesPerSession,
		Replicas: cfg.Cluster.Replicas,
		Logger:   log.With("part", "journal"),
	}
}

// limitText cuts a string a person gave for an error message.
func limitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
