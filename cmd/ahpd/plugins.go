package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"sort"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/acp"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/script"
)

// pluginConfig declares one backend in the config file's plugins list:
//
//	plugins:
//	  - {name: gemini, kind: acp, command: gemini, args: [--acp]}
//	  - {name: claude, kind: claude, command: /opt/claude/bin/claude}
type pluginConfig struct {
	Name        string            `yaml:"name"`
	Kind        string            `yaml:"kind"`
	DisplayName string            `yaml:"displayName"`
	Description string            `yaml:"description"`
	Command     string            `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`
}

// The kinds of plugin a config may declare.
const (
	kindACP    = "acp"
	kindClaude = "claude"
)

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// checkPlugins refuses a plugins list ahpd could not make sense of, before
// anything starts.
func checkPlugins(list []pluginConfig) error {
	seen := map[string]bool{script.Provider: true}
	for i, p := range list {
		where := fmt.Sprintf("plugins[%d]", i)
		switch p.Kind {
		case kindACP:
			if p.Command == "" {
				return fmt.Errorf("%s (%s): an acp plugin needs a command", where, p.Name)
			}
		case kindClaude:
			if p.Name == "" {
				p.Name = claude.Provider
			}
			if p.Name != claude.Provider {
				return fmt.Errorf("%s: the claude plugin is named claude, not %q", where, p.Name)
			}
			if len(p.Args) > 0 || p.DisplayName != "" || p.Description != "" {
				return fmt.Errorf("%s: the claude plugin takes command and env only", where)
			}
		default:
			return fmt.Errorf("%s (%s): kind must be acp or claude, not %q", where, p.Name, p.Kind)
		}
		if !providerName.MatchString(p.Name) {
			return fmt.Errorf("%s: name %q: use lower-case letters, digits, '.', '_' and '-'", where, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("%s: provider %q is declared twice (script is built in)", where, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// newBackends registers the Claude Code CLI (configured or found on PATH
// when a session starts), the declared ACP agents and the built-in script
// backend, in that order, the config's defaultProvider first: root lists
// the agents so, and the default agent is the first real one that can
// run (default_agent.go). A backend that cannot run is the host's to list
// as unavailable; nothing here fails for it.
func newBackends(cfg *config, log *slog.Logger) (*plugins.Registry, error) {
	claudeOpts := claude.Options{Logger: log}
	if i := slices.IndexFunc(cfg.Plugins, func(p pluginConfig) bool { return p.Kind == kindClaude }); i >= 0 {
		claudeOpts.Command = cfg.Plugins[i].Command
		claudeOpts.Env = environ(cfg.Plugins[i].Env)
	}
	list := []plugins.Backend{claude.New(claudeOpts)}
	for _, p := range cfg.Plugins {
		if p.Kind != kindACP {
			continue
		}
		list = append(list, acp.New(acp.Config{
			Name:        p.Name,
			DisplayName: p.DisplayName,
			Description: p.Description,
			Command:     p.Command,
			Args:        p.Args,
			Env:         p.Env,
		}, log))
	}
	list = append(list, script.New(filepath.Join(cfg.StateDir, "transcripts", "script")))
	slices.SortStableFunc(list, func(a, b plugins.Backend) int {
		return cmp.Compare(btoi(b.Info().Provider == cfg.DefaultProvider), btoi(a.Info().Provider == cfg.DefaultProvider))
	})
	reg := plugins.NewRegistry()
	for _, b := range list {
		if err := reg.Register(b); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// environ turns an env map into KEY=VALUE entries, sorted so the order
// does not depend on the map's.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
