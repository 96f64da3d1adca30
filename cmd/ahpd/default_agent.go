package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/script"
)

// The default agent: what a session runs on when whoever makes it names
// no provider (`ahpd run` without --provider, POST /v1/sessions without
// one, an automation whose template has none). It is a real agent or a
// refusal, never the script backend unasked: a CI job that names no
// provider must not go green having echoed its message.

// errNoAgent is why a session naming no provider cannot be made; the
// host refuses with it (-32002), and the CLI and the HTTP API add how to
// name the script backend in their own terms.
var errNoAgent = errors.New("no agent can run a session that names no provider: install the Claude Code CLI (" +
	claude.InstallHint + ") so that `claude` is on ahpd's PATH, or declare an ACP agent in ahpd's config file " +
	"(plugins:, docs/PLUGINS.md); the built-in script backend runs only when named as the provider")

// checkProviders refuses a defaultProvider, or a declared automation's
// provider, that names no backend the config gives ahpd.
func checkProviders(cfg *config) error {
	known := []string{claude.Provider}
	for _, p := range cfg.Plugins {
		if p.Kind == kindACP {
			known = append(known, p.Name)
		}
	}
	known = append(known, script.Provider)
	if p := cfg.DefaultProvider; p != "" && !slices.Contains(known, p) {
		return fmt.Errorf("config file: defaultProvider %q is none of ahpd's agents (%v)", p, known)
	}
	for i, a := range cfg.Automations {
		if p := a.Session.Provider; p != "" && !slices.Contains(known, p) {
			return fmt.Errorf("config file: automations[%d].session.provider: %q is none of ahpd's agents (%v)", i, p, known)
		}
	}
	return nil
}

// defaultProvider returns the host's DefaultProvider: the config's
// defaultProvider when it names one that can run, else the first real
// agent that can (Claude Code when its CLI is found, then the declared
// ACP agents in the config's order). It asks each backend every time: a
// CLI installed since ahpd started counts at once.
func defaultProvider(cfg *config, reg *plugins.Registry) func() (string, error) {
	return func() (string, error) {
		if p := cfg.DefaultProvider; p != "" {
			if err := canRun(reg, p); err != nil {
				return "", fmt.Errorf("the default provider %s (defaultProvider in the config file) cannot run: %w", p, err)
			}
			return p, nil
		}
		for _, p := range reg.Providers() {
			if p != script.Provider && canRun(reg, p) == nil {
				return p, nil
			}
		}
		return "", errNoAgent
	}
}

// canRun asks a backend that can tell whether it can run now.
func canRun(reg *plugins.Registry, provider string) error {
	b, ok := reg.Get(provider)
	if !ok {
		return fmt.Errorf("no backend %s", provider)
	}
	c, ok := b.(plugins.Checker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Check(ctx)
}

// warnDefaultless logs, at start, declared automations that name no
// provider on a host with no default agent: each of their runs fails
// saying why, but ahpd still starts (an agent may be installed later).
func warnDefaultless(cfg *config, reg *plugins.Registry, log *slog.Logger) {
	for i, a := range cfg.Automations {
		if a.Session.Provider != "" {
			continue
		}
		if _, err := defaultProvider(cfg, reg)(); err != nil {
			log.Warn("a declared automation names no provider and no agent can run it", "automation", fmt.Sprintf("automations[%d]", i), "err", err)
		}
	}
}
