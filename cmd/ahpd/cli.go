package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// The command line for scripts and CI: subcommands that talk to a running
// ahpd through the client package. Each lives in a cli_*.go file and
// registers the cobra command that makes it (cli_root.go), so a new one
// is one file.

// cliIO is what a command reads and writes, and the command it is (for
// its usage line).
type cliIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	cmd            *cobra.Command
}

// Exit statuses of the commands.
const (
	exitOK         = 0
	exitFailed     = 1   // the turn or the request failed
	exitUsage      = 2   // a usage mistake, or a daemon with no agent for it
	exitNeedsInput = 3   // the turn waits on a person, and none is here to ask
	exitToolFailed = 4   // the turn completed, but its last tool call failed
	exitInterrupt  = 130 // SIGINT: 128 + 2
)

// connFlags are the flags every command takes to find the daemon.
type connFlags struct {
	url, token, tokenFile, stateDir string
}

func (f *connFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "the daemon's address, `URL` (or $AHPD_URL)")
	fs.StringVar(&f.token, "token", "", "the token `T` to present (or $AHPD_TOKEN)")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the token from `F`")
	fs.StringVar(&f.stateDir, "state-dir", "", "the daemon's state directory, `DIR` (default $XDG_STATE_HOME/ahpd)")
}

// newCommand is a subcommand that talks to the daemon: use is its name
// and arguments, short what it does, in one line. It takes the
// connection flags (into conn) and those bind adds; run gets the
// positional arguments, flags anywhere among them (`ahpd run "msg"
// --json` as well as `ahpd run --json "msg"`, "--" ending them), and
// returns the exit status.
func newCommand(use, short string, conn *connFlags, bind func(fs *pflag.FlagSet),
	run func(ctx context.Context, pos []string, io cliIO) int) *cobra.Command {
	// Use names the flags that matter; the help lists them all.
	c := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, DisableFlagsInUseLine: true}
	if bind != nil {
		bind(c.Flags())
	}
	if conn != nil {
		conn.bind(c.Flags())
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return exitWith(run(cmd.Context(), args, ioOf(cmd)))
	}
	return c
}

// cmdUsageError prints a usage mistake and returns the usage status.
func cmdUsageError(io cliIO, name string, err error) int {
	fmt.Fprintf(io.stderr, "ahpd %s: %v (usage: %s)\n", name, err, io.cmd.UseLine())
	return exitUsage
}

const connUsage = `Every command finds the daemon in its state directory (the address it
listens on and its connection token), unless told otherwise:
  --url URL          the daemon's address (or $AHPD_URL)
  --token T          the token to present (or $AHPD_TOKEN)
  --token-file F     read the token from F
  --state-dir DIR    the daemon's state directory (default $XDG_STATE_HOME/ahpd)
`

// fail prints err with what to do about it and returns the failure status.
func fail(io cliIO, name string, err error) int {
	fmt.Fprintf(io.stderr, "ahpd %s: %v\n", name, err)
	return exitFailed
}

// dial finds the daemon and connects to it.
func dial(ctx context.Context, f connFlags) (*client.Client, error) {
	ep, err := client.Locate(client.LocateOptions{URL: f.url, Token: f.token, TokenFile: f.tokenFile, StateDir: f.stateDir})
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, ep.URL, &client.Options{
		Token:      ep.Token,
		ClientInfo: &protocol.Implementation{Name: "ahpd-cli", Version: &version},
	})
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, client.ErrUnauthorized) && ep.Withheld != "":
		return nil, fmt.Errorf("%s wants a token: pass --token or --token-file, or set AHPD_TOKEN (the local daemon's, in %s, goes only to its own address%s)", ep.URL, ep.Withheld, homeNote(ep.Home))
	case errors.Is(err, client.ErrUnauthorized):
		return nil, fmt.Errorf("%s refused the token: pass --token or --token-file, or set AHPD_TOKEN (a daemon that made its own keeps it in <state-dir>/connection-token)", ep.URL)
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("no ahpd answers at %s: start one with `ahpd` (if one crashed, its address file was left behind)", ep.URL)
	}
	return nil, err
}

// homeNote names the local daemon's address, for the message of a token
// withheld from another.
func homeNote(home string) string {
	if home == "" {
		return ", and none is recorded: it is not running"
	}
	return ", " + home
}

// resolveSession turns what a person typed (a session id, a unique
// prefix of one, or a URI) into the session's URI.
func resolveSession(ctx context.Context, c *client.Client, arg string) (string, error) {
	if strings.Contains(arg, ":/") {
		return arg, nil
	}
	rows, err := listAll(ctx, c)
	if err != nil {
		return "", err
	}
	var found []string
	for _, r := range rows {
		id := sessionID(r.Resource)
		if id == arg {
			return r.Resource, nil
		}
		if strings.HasPrefix(id, arg) {
			found = append(found, r.Resource)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no session %s: `ahpd ls --all` lists them", protocol.Quote(arg))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s names %d sessions: give more of the id", protocol.Quote(arg), len(found))
}

// listAll reads every page of listSessions.
func listAll(ctx context.Context, c *client.Client) ([]protocol.SessionSummary, error) {
	var out []protocol.SessionSummary
	var cursor *string
	for {
		var res protocol.ListSessionsResult
		if err := c.Call(ctx, "listSessions", protocol.ListSessionsParams{Cursor: cursor}, &res); err != nil {
			return nil, fmt.Errorf("listing sessions: %w", err)
		}
		out = append(out, res.Items...)
		if res.NextCursor == nil || *res.NextCursor == "" || len(res.Items) == 0 {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// sessionID is the id part of a session URI.
func sessionID(uri string) string {
	if su, err := protocol.ParseSessionURI(uri); err == nil {
		return su.ID
	}
	return uri
}

// isTerminalWriter reports whether w is a terminal (not /dev/null).
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && terminal(f)
}

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && terminal(f)
}

// sessionCommand is a command that runs fn on the session its one
// argument names: the shape of show, cancel, status, suspend, resume, rm
// and events. extra adds its own flags.
func sessionCommand(use, short string, extra func(*pflag.FlagSet),
	fn func(ctx context.Context, io cliIO, c *client.Client, session string) error) *cobra.Command {
	var cf connFlags
	name := strings.Fields(use)[0]
	cmd := newCommand(use, short, &cf, extra, func(ctx context.Context, pos []string, io cliIO) int {
		if len(pos) != 1 {
			return cmdUsageError(io, name, errors.New("name one session"))
		}
		c, err := dial(ctx, cf)
		if err != nil {
			return fail(io, name, err)
		}
		defer c.Close()
		session, err := resolveSession(ctx, c, pos[0])
		if err != nil {
			return fail(io, name, err)
		}
		if err := fn(ctx, io, c, session); err != nil {
			return fail(io, name, err)
		}
		return exitOK
	})
	cmd.ValidArgsFunction = sessionArg(&cf)
	return cmd
}

// sessionArg completes a command's first argument, a session, with the
// ids of the sessions of the daemon cf finds.
func sessionArg(cf *connFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeSessions(cmd.Context(), *cf, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeSessions are the ids of the daemon's sessions that start with
// prefix, each with its title, for completion: none when no daemon
// answers soon.
func completeSessions(ctx context.Context, cf connFlags, prefix string) []cobra.Completion {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := dial(ctx, cf)
	if err != nil {
		return nil
	}
	defer c.Close()
	rows, err := listAll(ctx, c)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, r := range rows {
		if id := sessionID(r.Resource); strings.HasPrefix(id, prefix) && r.Status&protocol.StatusIsArchived == 0 {
			out = append(out, cobra.CompletionWithDesc(id, oneLine(r.Title, 50)))
		}
	}
	return out
}
