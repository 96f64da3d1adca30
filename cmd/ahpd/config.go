package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/webhooks"
)

// config is ahpd's configuration: the YAML file's keys, with the flags
// laid over them.
type config struct {
	Listen string `yaml:"listen"`
	// listener is the socket systemd passed (systemd.go), served instead
	// of a new one on Listen, which then names its address.
	listener               net.Listener
	ConnectionToken        string        `yaml:"connectionToken"`
	ConnectionTokenFile    string        `yaml:"connectionTokenFile"`
	WithoutConnectionToken bool          `yaml:"withoutConnectionToken"`
	Stdio                  bool          `yaml:"stdio"`
	StateDir               string        `yaml:"stateDir"`
	Sessions               string        `yaml:"sessions"`
	LogLevel               string        `yaml:"logLevel"`
	LogFormat              string        `yaml:"logFormat"`
	ShutdownGrace          time.Duration `yaml:"shutdownGrace"`
	// SleepAfterMinutes is how long a quiet session keeps its agents; 0
	// keeps them for good. Fractions are allowed.
	SleepAfterMinutes float64 `yaml:"sleepAfterMinutes"`
	// SessionResidencyLimit is how many sessions may be resident; 0 means
	// no limit.
	SessionResidencyLimit int `yaml:"sessionResidencyLimit"`
	// Users is the users directory (YAML); "" is a host with none, where
	// every connection is root.
	Users string `yaml:"users"`
	// WorktreesRoot is where worktree sessions' trees go; "" puts each
	// beside its repository.
	WorktreesRoot string `yaml:"worktreesRoot"`
	// AllowedRoots are the directories sessions may work in, for whoever
	// is held to them (host.Options.AllowedRoots); none lets sessions
	// work anywhere. parseConfig resolves them.
	AllowedRoots []string `yaml:"allowedRoots"`
	// Plugins declares backends beyond the built-in ones (config file
	// only).
	Plugins []pluginConfig `yaml:"plugins"`
	// DefaultProvider is the agent a session naming no provider runs on;
	// "" picks the first real agent that can run (default_agent.go).
	DefaultProvider string `yaml:"defaultProvider"`
	// Limits bound each connection (config file only); what is left out
	// takes the default.
	Limits limitsConfig `yaml:"limits"`
	// Budgets bound what each person holds at once (config file only;
	// config_budgets.go).
	Budgets budgetsConfig `yaml:"budgets"`
	// ClientWindow is how long a client whose connections all closed is
	// remembered, to reconnect by replay (config file only).
	ClientWindow time.Duration `yaml:"clientWindow"`
	// MetricsListen serves /metrics on an address of its own, without the
	// token; "" serves it only beside AHP, behind the token.
	MetricsListen string `yaml:"metricsListen"`
	// Pprof serves net/http/pprof on MetricsListen, and only there.
	Pprof bool `yaml:"pprof"`
	// Automations are declared in the file (config file only): runnable
	// over the protocol, changed only here (config_automations.go).
	Automations []automationConfig `yaml:"automations"`
	// FileChangedDebounce is how long a file must be left alone before
	// its changes make one file-changed event of the automations; 0 is
	// the default, 200ms.
	FileChangedDebounce time.Duration `yaml:"fileChangedDebounce"`
	// NATS is where the journal is kept: no URL runs NATS in the daemon
	// (config_journal.go, docs/JOURNAL.md).
	NATS natsConfig `yaml:"nats"`
	// Journal is how long the journal keeps what (config file only).
	Journal journalConfig `yaml:"journal"`
	// Cluster names this host among others on the same NATS
	// (config_cluster.go, docs/CLUSTER.md).
	Cluster clusterConfig `yaml:"cluster"`
	// Checkpoints says where sessions' checkpoints are pushed
	// (config_checkpoints.go).
	Checkpoints checkpointsConfig `yaml:"checkpoints"`
	// Webhooks are posted what happens in sessions (config file only;
	// config_webhooks.go, docs/WEBHOOKS.md).
	Webhooks []webhooks.Spec `yaml:"webhooks"`
	// Permissions are the permissions of a session whose config sets
	// none, and InputTimeout how long its turns wait for a person
	// (config file only; config_permissions.go, docs/PERMISSIONS.md).
	// They stay YAML until parseConfig reads them into
	// defaultPermissions and defaultInputTimeout.
	Permissions  yaml.Node `yaml:"permissions"`
	InputTimeout yaml.Node `yaml:"inputTimeout"`
	// declared are Automations, checked by parseConfig.
	declared []declaredAutomation
	// hooks are Webhooks, checked by parseConfig.
	hooks []webhooks.Webhook
	// defaultPermissions and defaultInputTimeout are Permissions and
	// InputTimeout, checked by parseConfig: ask and wait for ever when
	// the file gives neither.
	defaultPermissions  plugins.Permissions
	defaultInputTimeout time.Duration
}

// limitsConfig is host.Limits as the config file spells it.
type limitsConfig struct {
	MessageBytes     int           `yaml:"messageBytes"`
	CommandBytes     int           `yaml:"commandBytes"`
	QueuedBytes      int           `yaml:"queuedBytes"`
	QueuedMessages   int           `yaml:"queuedMessages"`
	InFlight         int           `yaml:"inFlight"`
	Subscriptions    int           `yaml:"subscriptions"`
	AttachedSessions int           `yaml:"attachedSessions"`
	IdentifierBytes  int           `yaml:"identifierBytes"`
	Handshake        time.Duration `yaml:"handshake"`
	Initialize       time.Duration `yaml:"initialize"`
	Idle             time.Duration `yaml:"idle"`
	Lifetime         time.Duration `yaml:"lifetime"`
}

func (l limitsConfig) host() host.Limits {
	return host.Limits(l)
}

const defaultListen = "127.0.0.1:9187"

// defaults are the settings neither the file nor a flag gave.
func defaults() config {
	return config{
		Listen:                defaultListen,
		Sessions:              "file",
		LogLevel:              "info",
		LogFormat:             "text",
		ShutdownGrace:         10 * time.Second,
		SleepAfterMinutes:     30,
		SessionResidencyLimit: 10,
		Journal:               journalConfig{MaxAge: defaultJournalAge, MaxBytesPerSession: defaultJournalBytes},
	}
}

// flagSet binds the command-line flags to cfg.
func flagSet(cfg *config, file *string) *flag.FlagSet {
	fs := flag.NewFlagSet("ahpd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "")
	fs.StringVar(&cfg.ConnectionToken, "connection-token", cfg.ConnectionToken, "")
	fs.StringVar(&cfg.ConnectionTokenFile, "connection-token-file", cfg.ConnectionTokenFile, "")
	fs.BoolVar(&cfg.WithoutConnectionToken, "without-connection-token", cfg.WithoutConnectionToken, "")
	fs.BoolVar(&cfg.Stdio, "stdio", cfg.Stdio, "")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "")
	fs.StringVar(&cfg.Sessions, "sessions", cfg.Sessions, "")
	fs.StringVar(file, "config", *file, "")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "")
	fs.Float64Var(&cfg.SleepAfterMinutes, "sleep-after-minutes", cfg.SleepAfterMinutes, "")
	fs.IntVar(&cfg.SessionResidencyLimit, "session-residency-limit", cfg.SessionResidencyLimit, "")
	fs.StringVar(&cfg.Users, "users", cfg.Users, "")
	fs.StringVar(&cfg.WorktreesRoot, "worktrees-root", cfg.WorktreesRoot, "")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", cfg.MetricsListen, "")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "")
	fs.StringVar(&cfg.NATS.URL, "nats", cfg.NATS.URL, "")
	fs.StringVar(&cfg.NATS.Node.Listen, "nats-listen", cfg.NATS.Node.Listen, "")
	fs.StringVar(&cfg.NATS.Node.Cluster, "nats-cluster", cfg.NATS.Node.Cluster, "")
	fs.StringVar(&cfg.NATS.TLS.Cert, "nats-tls-cert", cfg.NATS.TLS.Cert, "")
	fs.StringVar(&cfg.NATS.TLS.Key, "nats-tls-key", cfg.NATS.TLS.Key, "")
	fs.StringVar(&cfg.NATS.TLS.CA, "nats-tls-ca", cfg.NATS.TLS.CA, "")
	fs.Func("nats-routes", "", func(v string) error {
		cfg.NATS.Node.Routes = nil
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				cfg.NATS.Node.Routes = append(cfg.NATS.Node.Routes, r)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.Cluster.HostID, "host-id", cfg.Cluster.HostID, "")
	fs.DurationVar(&cfg.Cluster.LeaseTTL, "lease-ttl", cfg.Cluster.LeaseTTL, "")
	fs.StringVar(&cfg.Checkpoints.Push, "push-checkpoints", cfg.Checkpoints.Push, "")
	fs.Func("labels", "", func(v string) error {
		labels, err := parseLabels(v)
		cfg.Cluster.Labels = labels
		return err
	})
	// One flag holds the whole list, so that it replaces the file's, and
	// given twice, the last wins, as every other flag does.
	fs.Func("allowed-roots", "", func(v string) error {
		cfg.AllowedRoots = nil
		for _, d := range strings.Split(v, ",") {
			if d != "" {
				cfg.AllowedRoots = append(cfg.AllowedRoots, d)
			}
		}
		return nil
	})
	return fs
}

// parseConfig reads the defaults, then the config file the flags name,
// then the flags: flags given on the command line win over the file, and
// the file over the defaults.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	return parseConfigEnv(args, os.LookupEnv, stderr)
}

// parseConfigEnv is parseConfig with the environment lookupEnv gives.
// Each setting comes from the first of: its flag, its AHPD_ variable
// (envName), the config file, the default.
func parseConfigEnv(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*config, error) {
	// A first pass finds the config file, and which flags were given.
	probe, file := defaults(), ""
	fs := flagSet(&probe, &file)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w (see ahpd --help)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see ahpd --help)", fs.Arg(0))
	}
	var flagged []string
	fs.Visit(func(f *flag.Flag) { flagged = append(flagged, f.Name) })
	if file == "" {
		file, _ = lookupEnv(envName("config"))
	}
	cfg := defaults()
	if file != "" {
		if err := readConfigFile(file, &cfg); err != nil {
			return nil, err
		}
	}
	if err := applyEnv(&cfg, lookupEnv, flagged); err != nil {
		return nil, err
	}
	if tokenChoice(flagged) {
		clearToken(&cfg)
	}
	if err := flagSet(&cfg, &file).Parse(args); err != nil {
		return nil, fmt.Errorf("%w (see ahpd --help)", err)
	}
	if cfg.StateDir == "" {
		dir, err := defaultStateDir()
		if err != nil {
			return nil, err
		}
		cfg.StateDir = dir
	}
	if cfg.Sessions != "file" && cfg.Sessions != "memory" {
		return nil, fmt.Errorf("--sessions must be file or memory, not %q", cfg.Sessions)
	}
	if cfg.SleepAfterMinutes < 0 || cfg.SessionResidencyLimit < 0 {
		return nil, errors.New("--sleep-after-minutes and --session-residency-limit must not be negative (0 turns each off)")
	}
	if cfg.Pprof && cfg.MetricsListen == "" {
		return nil, errors.New("--pprof serves the profiles on the metrics listener only: give --metrics-listen too")
	}
	if _, err := newLogger(io.Discard, cfg.LogLevel, cfg.LogFormat); err != nil {
		return nil, err
	}
	if err := cfg.Limits.host().Validate(); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if err := checkBudgets(cfg.Budgets); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if err := checkNATSNode(&cfg); err != nil {
		return nil, err
	}
	if err := checkCluster(&cfg); err != nil {
		return nil, err
	}
	if err := checkCheckpoints(&cfg); err != nil {
		return nil, err
	}
	if err := checkJournal(&cfg); err != nil {
		return nil, err
	}
	if err := checkPermissions(&cfg); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if err := checkPlugins(cfg.Plugins); err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if err := checkProviders(&cfg); err != nil {
		return nil, err
	}
	declared, err := checkAutomations(cfg.Automations, cfg.Users)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if d := cfg.FileChangedDebounce; d != 0 && (d < 10*time.Millisecond || d > 10*time.Second) {
		return nil, fmt.Errorf("config file: fileChangedDebounce: %v is not between 10ms and 10s", d)
	}
	cfg.declared = declared
	if err := checkWebhooks(&cfg); err != nil {
		return nil, err
	}
	// Resolved now, so that a mistake is a usage error and the roots are
	// where their symlinks led at start.
	roots, err := host.ResolveRoots(cfg.AllowedRoots)
	if err != nil {
		return nil, err
	}
	cfg.AllowedRoots = roots
	tokens := 0
	for _, set := range []bool{cfg.ConnectionToken != "", cfg.ConnectionTokenFile != "", cfg.WithoutConnectionToken} {
		if set {
			tokens++
		}
	}
	if tokens > 1 {
		return nil, errors.New("give at most one of --connection-token, --connection-token-file and --without-connection-token")
	}
	return &cfg, nil
}

// envName is the variable a flag may be given as: AHPD_ and its name,
// upper case, dashes as underscores (--state-dir is AHPD_STATE_DIR).
func envName(flagName string) string {
	return "AHPD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv lays the AHPD_ variables of the flags not given (flagged) over
// cfg. The three token options are one choice: one of them given in the
// environment replaces the file's.
func applyEnv(cfg *config, lookupEnv func(string) (string, bool), flagged []string) error {
	var file string
	fs := flagSet(cfg, &file)
	type setting struct{ flag, value string }
	var set []setting
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" || slices.Contains(flagged, f.Name) {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			set = append(set, setting{f.Name, v})
			names = append(names, f.Name)
		}
	})
	if tokenChoice(names) {
		clearToken(cfg)
	}
	for _, st := range set {
		if err := fs.Set(st.flag, st.value); err != nil {
			return fmt.Errorf("%s=%.64q: %w", envName(st.flag), st.value, err)
		}
	}
	return nil
}

// tokenChoice reports whether names hold one of the token options.
func tokenChoice(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool {
		return n == "connection-token" || n == "connection-token-file" || n == "without-connection-token"
	})
}

func clearToken(cfg *config) {
	cfg.ConnectionToken, cfg.ConnectionTokenFile, cfg.WithoutConnectionToken = "", "", false
}

// readConfigFile lays a YAML config file over cfg: keys the file does not
// name keep their values.
func readConfigFile(path string, cfg *config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, explainConfig(err))
	}
	return nil
}

// defaultStateDir is $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd: where
// the client package looks for a local daemon too.
func defaultStateDir() (string, error) {
	return client.DefaultStateDir(nil)
}
