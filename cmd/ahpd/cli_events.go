package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

func init() {
	register(eventsCommand)
}

func eventsCommand() *cobra.Command {
	var follow, asJSON bool
	return sessionCommand("events [--follow] [--json] SESSION", "print a session's timeline (--follow: then keep printing it)", func(fs *pflag.FlagSet) {
		fs.BoolVar(&follow, "follow", false, "go on printing what happens, until interrupted")
		fs.BoolVar(&asJSON, "json", false, "one JSON event a line")
	}, func(ctx context.Context, io cliIO, c *client.Client, session string) error {
		p := eventPrinter{io: io, json: asJSON}
		if follow {
			// Watched first: what happens while the past is read comes
			// both ways, and is printed once.
			if err := watchAllChats(ctx, c, session); err != nil {
				return err
			}
		}
		if err := p.history(ctx, c, session); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		return p.live(ctx, c, session)
	})
}

// eventPrinter prints timeline events, each once, in order.
type eventPrinter struct {
	io   cliIO
	json bool
	last int64 // the seq of the last event printed
}

type eventsPage struct {
	Events []timeline.Event `json:"events"`
	More   bool             `json:"more"`
}

// history prints the session's timeline so far, oldest first.
func (p *eventPrinter) history(ctx context.Context, c *client.Client, session string) error {
	after := int64(0)
	for {
		var page eventsPage
		if err := c.Call(ctx, "ahpd/sessionEvents", map[string]any{"channel": session, "after": after, "limit": 1000}, &page); err != nil {
			return err
		}
		for _, ev := range page.Events {
			p.print(ev)
			after = ev.Seq
		}
		if !page.More {
			return nil
		}
	}
}

// live prints the events of the actions the host sends from now on,
// until the command is interrupted or the connection ends.
func (p *eventPrinter) live(ctx context.Context, c *client.Client, session string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-c.Events():
			if !ok {
				return errors.New("the connection to ahpd ended")
			}
			if ev.Action == nil || ev.Action.RejectionReason != nil {
				continue
			}
			if added, ok := ev.Action.Action.(*protocol.SessionChatAddedAction); ok && ev.Action.Channel == session {
				if _, err := c.Subscribe(ctx, added.Summary.Resource); err != nil {
					return err
				}
			}
			for _, te := range timeline.Of(*ev.Action, time.Now()) {
				p.print(te)
			}
		}
	}
}

func (p *eventPrinter) print(ev timeline.Event) {
	if ev.Seq < p.last {
		return // printed from the past already
	}
	p.last = ev.Seq
	if p.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(p.io.stdout, "%s\n", b)
		return
	}
	fmt.Fprintf(p.io.stdout, "%s  %-14s %s\n", ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Kind, oneLine(ev.Text, 120))
}

// watchAllChats subscribes to a session and every chat it has.
func watchAllChats(ctx context.Context, c *client.Client, session string) error {
	if _, err := watchSession(ctx, c, session); err != nil {
		return err
	}
	ss, ok := c.State(session).(*protocol.SessionState)
	if !ok {
		return fmt.Errorf("%s is not a session", session)
	}
	for _, chat := range ss.Chats {
		if c.State(chat.Resource) != nil {
			continue // the default one, watched already
		}
		if _, err := c.Subscribe(ctx, chat.Resource); err != nil {
			return err
		}
	}
	return nil
}
