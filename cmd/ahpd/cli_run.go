package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

func init() {
	register(runCommand, sendCommand)
}

// runOptions are `ahpd run`'s flags.
type runOptions struct {
	conn        connFlags
	folder      string
	provider    string
	worktree    bool
	title       string
	permissions permissionFlags
	wait        bool
	session     string
	json        bool
	// config is what permissions give, checked: nil for none.
	config protocol.Object
}

func runCommand() *cobra.Command {
	var o runOptions
	c := newCommand(`run [--folder DIR] [--provider P] [--worktree] [--title T] [--approve ask|edits|all] [--allow RULE]... [--deny RULE]... [--input-timeout D] [--wait] [--session ID] [--json] "message"`,
		"run a turn and stream it; exit 0 complete, 1 failed, 2 no agent, 3 needs input, 4 last tool failed, 130 interrupted",
		&o.conn, func(fs *pflag.FlagSet) {
			fs.StringVar(&o.folder, "folder", "", "the new session's folder, `DIR` (default the current directory)")
			fs.StringVar(&o.provider, "provider", "", "the agent, `P` (default the daemon's default agent)")
			fs.BoolVar(&o.worktree, "worktree", false, "work in a git worktree of the session's own")
			fs.StringVar(&o.title, "title", "", "the new session's title, `T`")
			o.permissions.bind(fs, true)
			fs.BoolVar(&o.wait, "wait", false, "when the turn waits on a person and none is here to ask, wait for an answer from elsewhere")
			fs.StringVar(&o.session, "session", "", "continue the session `ID` instead of making one")
			fs.BoolVar(&o.json, "json", false, "one JSON object a line (docs/CLI.md)")
		}, func(ctx context.Context, pos []string, io cliIO) int {
			return runTurn(ctx, io, o, pos)
		})
	c.Long = `run makes a session (or continues one, --session), sends the message, and
streams the turn as it happens: the agent's text and a line for each
tool call on stdout, the end of the turn and errors on stderr. The
session's permissions decide which tool calls run without a person
confirming them; on a terminal run asks, elsewhere it stops with 3.

Exit status: 0 the turn completed; 1 it failed or was cancelled, or the
daemon could not be reached; 2 a usage mistake, or no agent can run; 3 the
turn waits on a person and stdin is no terminal (without --wait); 4 it
completed, but its last tool call failed; 130 interrupted (the turn is
cancelled first).`
	c.Example = `  ahpd run --provider script "say hello"
  ahpd run --folder ~/src/app --title "Fix the build" "the build fails on main: fix it"
  ahpd run --worktree --approve edits "add a test for the parser"
  ahpd run --session 4f2a --allow execute "now run the tests"`
	return c
}

func runTurn(ctx context.Context, io cliIO, o runOptions, pos []string) int {
	var err error
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		err = errors.New(`give the message as one argument (quote it)`)
	}
	if err == nil && o.session != "" && (o.folder != "" || o.provider != "" || o.worktree) {
		err = errors.New("--session continues a session as it is: --folder, --provider and --worktree are for new ones")
	}
	if err == nil {
		o.config, err = o.permissions.config()
	}
	if err != nil {
		return cmdUsageError(io, "run", err)
	}
	c, err := dial(ctx, o.conn)
	if err != nil {
		return fail(io, "run", err)
	}
	defer c.Close()

	session := ""
	if o.session != "" {
		session, err = resolveSession(ctx, c, o.session)
	} else {
		session, err = createSession(ctx, c, o)
	}
	var noAgent *noAgentError
	if errors.As(err, &noAgent) {
		fmt.Fprintf(io.stderr, "ahpd run: %v\n", err)
		return exitUsage
	}
	if err != nil {
		return fail(io, "run", err)
	}
	chat, err := watchSession(ctx, c, session)
	if err != nil {
		return fail(io, "run", err)
	}
	if o.title != "" {
		if err := c.DispatchWait(ctx, session, &protocol.SessionTitleChangedAction{Title: o.title}); err != nil {
			return fail(io, "run", fmt.Errorf("setting the title: %w", err))
		}
	}
	if cs, _ := c.State(chat).(*protocol.ChatState); cs != nil && cs.ActiveTurn != nil {
		return fail(io, "run", fmt.Errorf("session %s is running a turn: wait for it, or `ahpd cancel %s`", sessionID(session), sessionID(session)))
	}
	if o.session != "" && o.config != nil {
		// The session's permissions change for good: its later turns,
		// whoever sends them, are decided by them too.
		if err := c.DispatchWait(ctx, session, &protocol.SessionConfigChangedAction{Config: o.config}); err != nil {
			var rej *client.RejectedError
			if errors.As(err, &rej) {
				err = errors.New(rej.Reason)
			}
			return fail(io, "run", fmt.Errorf("changing the session's permissions: %w", err))
		}
	}
	turnID := "cli-" + randomID()
	var v view
	if o.json {
		v = newJSONView(io.stdout)
	} else {
		v = newTextView(io.stdout, io.stderr, isTerminalWriter(io.stdout))
	}
	provider := ""
	if ss, _ := c.State(session).(*protocol.SessionState); ss != nil {
		provider = ss.Provider
	}
	if o.json {
		v.show(turnEvent{Event: "session", Session: session, Chat: chat, Turn: turnID, Provider: provider})
	} else {
		fmt.Fprintf(io.stderr, "ahpd run: session %s on %s\n", sessionID(session), provider)
	}
	if err := c.DispatchWait(ctx, chat, userTurn(turnID, pos[0])); err != nil {
		return fail(io, "run", fmt.Errorf("the message was not taken: %w", err))
	}
	a := newAnswerer(io, v, session, isTerminalReader(io.stdin), o.wait)
	return follow(ctx, c, chat, turnID, v, a)
}

// createSession makes a session for `ahpd run`.
func createSession(ctx context.Context, c *client.Client, o runOptions) (string, error) {
	folder := o.folder
	if folder == "" {
		folder = "."
	}
	abs, err := filepath.Abs(folder)
	if err != nil {
		return "", fmt.Errorf("--folder: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("--folder %s is not a directory", abs)
	}
	// No --provider: the daemon picks its default agent, or refuses.
	params := protocol.CreateSessionParams{
		Channel:            "ahp-session:/" + randomID(),
		WorkingDirectories: []string{(&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()},
		// Listed as soon as made (SESSIONS.md); the config taken as given
		// or refused, never left at a default the flags did not ask for.
		Meta:   protocol.Object{"ahpd.keep": []byte("true"), "ahpd.strictConfig": []byte("true")},
		Config: maps.Clone(o.config),
	}
	if o.provider != "" {
		params.Provider = &o.provider
	}
	if o.worktree {
		if params.Config == nil {
			params.Config = protocol.Object{}
		}
		params.Config["isolation"] = []byte(`"worktree"`)
	}
	err = c.Call(ctx, "createSession", params, nil)
	switch {
	case err == nil:
		return params.Channel, nil
	case client.ErrorCode(err) == protocol.CodeProviderNotFound && o.provider == "":
		return "", &noAgentError{msg: hostMessage(err)}
	case client.ErrorCode(err) == protocol.CodeProviderNotFound:
		return "", fmt.Errorf("%s: choose one with --provider", hostMessage(err))
	}
	return "", fmt.Errorf("creating the session: %w", err)
}

// noAgentError is a daemon with no agent to run a session that names no
// provider on: `ahpd run` exits 2 with it, as for a usage mistake, since
// the command as given cannot work on that daemon.
type noAgentError struct{ msg string }

func (e *noAgentError) Error() string {
	return e.msg + "; `--provider script` runs the built-in script backend"
}

// hostMessage is the message of a host's error, without its code.
func hostMessage(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// watchSession subscribes to a session and its default chat, and returns
// the chat.
func watchSession(ctx context.Context, c *client.Client, session string) (string, error) {
	st, err := c.Subscribe(ctx, session)
	if err != nil {
		return "", err
	}
	chat := protocol.DefaultChatURI(session)
	if ss, ok := st.(*protocol.SessionState); ok && ss.DefaultChat != nil {
		chat = *ss.DefaultChat
	}
	if _, err := c.Subscribe(ctx, chat); err != nil {
		return "", err
	}
	return chat, nil
}

func userTurn(id, text string) *protocol.ChatTurnStartedAction {
	return &protocol.ChatTurnStartedAction{TurnID: id, StartedAt: client.Now(),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sendCommand() *cobra.Command {
	var cf connFlags
	c := newCommand(`send SESSION "message"`, "send a message to a session (queued while a turn runs) and return", &cf, nil,
		func(ctx context.Context, pos []string, io cliIO) int {
			return sendMessage(ctx, io, cf, pos)
		})
	c.ValidArgsFunction = sessionArg(&cf)
	return c
}

func sendMessage(ctx context.Context, io cliIO, cf connFlags, pos []string) int {
	if len(pos) != 2 || strings.TrimSpace(pos[1]) == "" {
		return cmdUsageError(io, "send", errors.New(`name the session and give the message (quote it)`))
	}
	c, err := dial(ctx, cf)
	if err != nil {
		return fail(io, "send", err)
	}
	defer c.Close()
	session, err := resolveSession(ctx, c, pos[0])
	if err != nil {
		return fail(io, "send", err)
	}
	chat, err := watchSession(ctx, c, session)
	if err != nil {
		return fail(io, "send", err)
	}
	id := "cli-" + randomID()
	if cs, _ := c.State(chat).(*protocol.ChatState); cs != nil && cs.ActiveTurn != nil {
		err = c.DispatchWait(ctx, chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: id,
			Message: userTurn(id, pos[1]).Message})
		if err == nil {
			fmt.Fprintf(io.stdout, "queued %s: it runs when the turn in %s ends\n", id, sessionID(session))
		}
	} else {
		err = c.DispatchWait(ctx, chat, userTurn(id, pos[1]))
		if err == nil {
			fmt.Fprintf(io.stdout, "sent %s: `ahpd show %s` shows it\n", id, sessionID(session))
		}
	}
	if err != nil {
		return fail(io, "send", fmt.Errorf("the message was not taken: %w", err))
	}
	return exitOK
}
