package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	hostevents "github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/webhooks"
)

// The config file's webhooks: (docs/WEBHOOKS.md): receivers that are
// posted what happened in sessions. Package webhooks checks them and
// delivers; the daemon opens it before the host, which tells it events
// from its first moment (turns a crash cut short end as ahpd starts), and
// closes it after.

// webhookStop bounds how long deliveries under way as ahpd stops get to
// be answered; those that are not are sent again at the next start.
const webhookStop = 2 * time.Second

// checkWebhooks checks the config file's webhooks: a mistake names the
// entry and the field, webhooks[1].url: ...
func checkWebhooks(cfg *config) error {
	hooks, err := webhooks.Check(cfg.Webhooks)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	cfg.hooks = hooks
	return nil
}

// openWebhooks starts delivering to the config's webhooks, keeping what
// waits under the state directory (nothing with --sessions memory). It
// returns the host's sink, nil without webhooks, and what closes it.
func openWebhooks(cfg *config, log *slog.Logger) (hostevents.Sink, func(), error) {
	if len(cfg.hooks) == 0 {
		return nil, func() {}, nil
	}
	dir := filepath.Join(cfg.StateDir, "webhooks")
	if cfg.Sessions == "memory" {
		dir = ""
	}
	d, err := webhooks.Open(webhooks.Options{
		Webhooks: cfg.hooks, Dir: dir, Logger: log.With("part", "webhooks"), UserAgent: "ahpd/" + version,
	})
	if err != nil {
		return nil, nil, err
	}
	for _, w := range cfg.hooks {
		log.Info("webhook", "name", w.Name, "url", w.Shown(), "events", w.Events, "signed", w.Secret != nil)
	}
	return d, func() {
		ctx, cancel := context.WithTimeout(context.Background(), webhookStop)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			log.Warn("the webhooks did not stop cleanly", "err", err)
		}
	}, nil
}
