package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// config is ahpd's configuration: the YAML file's keys, with the flags
// laid over them.
type config struct {
	Listen                 string        `yaml:"listen"`
	ConnectionToken        string        `yaml:"connectionToken"`
	ConnectionTokenFile    string        `yaml:"connectionTokenFile"`
	WithoutConnectionToken bool          `yaml:"withoutConnectionToken"`
	Stdio                  bool          `yaml:"stdio"`
	StateDir               string        `yaml:"stateDir"`
	Sessions               string        `yaml:"sessions"`
	LogLevel               string        `yaml:"logLevel"`
	ShutdownGrace          time.Duration `yaml:"shutdownGrace"`
}

const defaultListen = "127.0.0.1:9187"

// parseConfig reads the flags and the config file they name.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("ahpd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var flags config
	var file string
	fs.StringVar(&flags.Listen, "listen", defaultListen, "")
	fs.StringVar(&flags.ConnectionToken, "connection-token", "", "")
	fs.StringVar(&flags.ConnectionTokenFile, "connection-token-file", "", "")
	fs.BoolVar(&flags.WithoutConnectionToken, "without-connection-token", false, "")
	fs.BoolVar(&flags.Stdio, "stdio", false, "")
	fs.StringVar(&flags.StateDir, "state-dir", "", "")
	fs.StringVar(&flags.Sessions, "sessions", "file", "")
	fs.StringVar(&file, "config", "", "")
	fs.StringVar(&flags.LogLevel, "log-level", "info", "")
	fs.DurationVar(&flags.ShutdownGrace, "shutdown-grace", 10*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w (see ahpd --help)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see ahpd --help)", fs.Arg(0))
	}
	cfg := flags
	if file != "" {
		fromFile, err := readConfigFile(file)
		if err != nil {
			return nil, err
		}
		cfg = *fromFile
		// The three token options are one choice: a token option on the
		// command line replaces the file's, whichever of the three it gave.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "connection-token", "connection-token-file", "without-connection-token":
				cfg.ConnectionToken, cfg.ConnectionTokenFile, cfg.WithoutConnectionToken = "", "", false
			}
		})
		// Flags given on the command line win over the file; the file wins
		// over the flags' defaults.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "listen":
				cfg.Listen = flags.Listen
			case "connection-token":
				cfg.ConnectionToken = flags.ConnectionToken
			case "connection-token-file":
				cfg.ConnectionTokenFile = flags.ConnectionTokenFile
			case "without-connection-token":
				cfg.WithoutConnectionToken = flags.WithoutConnectionToken
			case "stdio":
				cfg.Stdio = flags.Stdio
			case "state-dir":
				cfg.StateDir = flags.StateDir
			case "sessions":
				cfg.Sessions = flags.Sessions
			case "log-level":
				cfg.LogLevel = flags.LogLevel
			case "shutdown-grace":
				cfg.ShutdownGrace = flags.ShutdownGrace
			}
		})
		if cfg.Listen == "" {
			cfg.Listen = defaultListen
		}
		if cfg.Sessions == "" {
			cfg.Sessions = "file"
		}
		if cfg.LogLevel == "" {
			cfg.LogLevel = "info"
		}
		if cfg.ShutdownGrace == 0 {
			cfg.ShutdownGrace = 10 * time.Second
		}
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
	if _, err := newLogger(io.Discard, cfg.LogLevel); err != nil {
		return nil, err
	}
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

func readConfigFile(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	var cfg config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return &cfg, nil
}

// defaultStateDir is $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd.
func defaultStateDir() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "ahpd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory: set --state-dir (%w)", err)
	}
	return filepath.Join(home, ".local", "state", "ahpd"), nil
}
