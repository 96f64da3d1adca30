package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/webhooks"
)

func init() {
	register(func() *cobra.Command {
		c := newGroup("webhooks log [--json] [--limit N]", "the webhooks and their recent deliveries (docs/WEBHOOKS.md)",
			`Webhooks: receivers the daemon's config file names, posted what happens
in sessions (see docs/WEBHOOKS.md).`, webhooksLog())
		c.SuggestFor = []string{"webhook"}
		return c
	})
}

func webhooksLog() *cobra.Command {
	var cf connFlags
	var asJSON bool
	var limit int
	c := newCommand("log [--json] [--limit N]", "the webhooks, and their recent deliveries, newest first", &cf, func(fs *pflag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the daemon's answer (ahpd/webhookLog) whole")
		fs.IntVar(&limit, "limit", 0, "the newest `N` deliveries, 1 to 1000 (default all the daemon keeps, 500)")
	}, func(ctx context.Context, pos []string, io cliIO) int {
		return webhookLog(ctx, io, cf, pos, asJSON, limit)
	})
	c.Long = `log lists the webhooks, and their recent deliveries, newest first (at
most N; all the daemon keeps, 500, by default): when, to which webhook,
which event of which session, how it went, how many attempts, and why
the last failed. --json prints the daemon's answer whole. Admins only: it
shows every user's sessions.`
	return c
}

func webhookLog(ctx context.Context, io cliIO, cf connFlags, pos []string, asJSON bool, limit int) int {
	const name = "webhooks log"
	switch {
	case len(pos) > 0:
		return cmdUsageError(io, name, fmt.Errorf("unexpected argument %s", protocol.Quote(pos[0])))
	case limit < 0 || limit > 1000:
		return cmdUsageError(io, name, fmt.Errorf("--limit %d: from 1 to 1000", limit))
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, name, err)
	}
	defer c.Close()
	var log webhooks.Log
	if err := c.Call(ctx, "ahpd/webhookLog", map[string]any{"limit": limit}, &log); err != nil {
		switch client.ErrorCode(err) {
		case protocol.CodePermissionDenied:
			err = fmt.Errorf("%w: the webhooks' log is for admins, for it shows every user's sessions", err)
		case protocol.CodeMethodNotFound:
			err = fmt.Errorf("%w: this daemon is older than webhooks", err)
		}
		return fail(io, name, err)
	}
	if asJSON {
		return writeJSON(io, name, log)
	}
	if len(log.Webhooks) == 0 {
		fmt.Fprintln(io.stderr, "ahpd webhooks log: the daemon has no webhooks: declare them in its config file (webhooks:, see docs/WEBHOOKS.md)")
		return exitOK
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WEBHOOK\tURL\tEVENTS\tSIGNED\tPENDING\tDELIVERED\tFAILED\tDROPPED")
	for _, w := range log.Webhooks {
		var kinds []string
		for _, k := range w.Events {
			kinds = append(kinds, string(k))
		}
		signed := "yes"
		if !w.Signed {
			signed = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", w.Name, w.URL, strings.Join(kinds, ","), signed, w.Pending, w.Delivered, w.Failed, w.Dropped)
	}
	if err := tw.Flush(); err != nil {
		return fail(io, name, err)
	}
	fmt.Fprintln(io.stdout)
	if len(log.Deliveries) == 0 {
		fmt.Fprintln(io.stdout, "no deliveries yet")
		return exitOK
	}
	tw = tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWEBHOOK\tEVENT\tSESSION\tSTATUS\tATTEMPTS\tLAST ERROR")
	for _, d := range log.Deliveries {
		session := "-"
		if d.Session != "" {
			session = sessionID(d.Session)
		}
		why := oneLine(d.Error, 100)
		if !d.Next.IsZero() {
			why = strings.TrimSpace(why + " (next " + d.Next.Local().Format(time.TimeOnly) + ")")
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", d.Time.Local().Format(time.DateTime), d.Webhook, d.Event, session, d.Status, d.Attempts)
		if why != "" {
			line += "\t" + why // a line without one ends with no padding
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fail(io, name, err)
	}
	return exitOK
}
