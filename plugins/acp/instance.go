package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
)

// clientVersion is the version ahpd gives as an ACP client.
const clientVersion = "0.1.0"

// instance is one agent process with its ACP connection, past the
// initialize handshake. Agent and Turns both run on one.
type instance struct {
	name    string
	proc    *process
	out     *stdoutReader // the agent's stdout, as the connection reads it
	conn    *sdk.ClientSideConnection
	client  *client
	init    sdk.InitializeResponse
	watched chan struct{} // closed when watch has returned
}

// launch spawns the agent for a session in dir and initializes it.
func (b *Backend) launch(ctx context.Context, dir string) (*instance, error) {
	if err := checkWorkDir(dir); err != nil {
		return nil, err
	}
	c, err := newClient(dir, b.log)
	if err != nil {
		return nil, err
	}
	proc, err := startProcess(b.cfg, dir, b.log)
	if err != nil {
		c.close()
		return nil, plugins.Unavailable(err)
	}
	// The SDK starts reading in NewClientSideConnection, and its reader
	// reads the logger SetLogger writes without synchronization: the
	// agent's output is held back until the logger is set.
	out := newStdoutReader(proc.Stdout(), c.notified)
	gate := &gatedReader{r: out, open: make(chan struct{})}
	conn := sdk.NewClientSideConnection(c, proc.input, gate)
	conn.SetLogger(slog.New(quietHandler{b.log.Handler()}).With("component", "acp-sdk"))
	close(gate.open)
	in := &instance{name: b.cfg.Name, proc: proc, out: out, conn: conn, client: c, watched: make(chan struct{})}
	go in.watch()

	in.init, err = conn.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo:      &sdk.Implementation{Name: "ahpd", Version: clientVersion},
		// What ahpd serves: text files in the working directory and
		// terminals. Nothing else is promised, so the agent asks for
		// nothing else.
		ClientCapabilities: sdk.ClientCapabilities{
			Fs:       sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
	})
	if err != nil {
		err = in.failure(ctx, "initializing", err)
		in.close()
		if !errors.Is(ctx.Err(), context.Canceled) {
			// An agent that dies or says nothing in time is no agent.
			err = plugins.Unavailable(err)
		}
		return nil, err
	}
	if v := in.init.ProtocolVersion; v != sdk.ProtocolVersionNumber {
		// The SDK does not check; a different version means different
		// messages.
		in.close()
		return nil, plugins.Unavailable(fmt.Errorf("acp: %s speaks ACP version %d, ahpd speaks %d", b.cfg.Name, v, sdk.ProtocolVersionNumber))
	}
	b.noteCaps(in.caps()) // what Info advertises (fork.go)
	return in, nil
}

// watch ends the process once the connection to it has ended, and the
// connection once the process has: one without the other is no agent.
//
// A connection ends with the process running when the agent broke it (a
// line too long) or closed its stdout: nothing it writes is read any
// more, so it is stopped as Close stops it. A process ends with the
// connection open when something outside its group holds its stdout:
// what the agent wrote before it went is read for a second more.
func (in *instance) watch() {
	defer close(in.watched)
	select {
	case <-in.conn.Done():
		in.proc.abandon(closeGrace)
	case <-in.proc.Exited():
		timer := time.NewTimer(time.Second)
		defer timer.Stop()
		select {
		case <-in.conn.Done():
		case <-timer.C:
			in.proc.CloseStdout()
			<-in.conn.Done()
		}
	}
}

// broken reports whether the agent is gone or going: the connection
// ended, or a request could not be written, which happens to an agent
// that exited before the connection saw the end of its output.
func (in *instance) broken() bool {
	return !in.alive() || in.proc.input.failed.Load()
}

// caps returns what the agent said it can do.
func (in *instance) caps() sdk.AgentCapabilities { return in.init.AgentCapabilities }

// alive reports whether the connection to the agent is still open.
func (in *instance) alive() bool {
	select {
	case <-in.conn.Done():
		return false
	default:
		return true
	}
}

// failure describes err, the failure of a request made while doing
// what, in the light of the agent's state: an agent that exited is
// reported with its exit status and the tail of its stderr, a request
// that ran out of ctx with ctx's error.
func (in *instance) failure(ctx context.Context, doing string, err error) error {
	if rerr := in.out.failure(); errors.Is(rerr, errLineTooLong) {
		return fmt.Errorf("acp: %s: the agent was stopped while %s: %w", in.name, doing, rerr)
	}
	if in.broken() {
		if exit := in.proc.exitError(); exit != nil {
			return fmt.Errorf("acp: %s: the agent ended while %s: %w", in.name, doing, exit)
		}
		return fmt.Errorf("acp: %s: the connection to the agent ended while %s%s", in.name, doing, in.stderrNote())
	}
	if ctx.Err() != nil {
		// The SDK reports our own context's end as a JSON-RPC error;
		// keep it recognisable.
		return fmt.Errorf("acp: %s: %s: %w%s", in.name, doing, ctx.Err(), in.stderrNote())
	}
	return fmt.Errorf("acp: %s: %s: %w", in.name, doing, err)
}

// stderrNote returns the tail of the agent's stderr to add to an error,
// or "" when it wrote nothing.
func (in *instance) stderrNote() string {
	tail := in.proc.lastStderr()
	if tail == "" {
		return ""
	}
	return "; stderr:\n" + tail
}

// close stops the agent and waits until nothing of the instance runs:
// the process and its group, the connection's reader, the terminals.
func (in *instance) close() {
	in.proc.stop(closeGrace)
	<-in.conn.Done()
	<-in.watched
	in.client.close()
}

// gatedReader reads r once open is closed.
type gatedReader struct {
	r    io.Reader
	open chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

// quietHandler logs the SDK's info messages at debug level: it reports
// every connection's end at info, which for ahpd is routine. Its errors
// (lines that are not JSON-RPC, a notification queue overflow) stay.
type quietHandler struct{ h slog.Handler }

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return q.h.Enabled(ctx, demote(l))
}

func (q quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return q.h.Handle(ctx, r)
}

func (q quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{q.h.WithAttrs(attrs)}
}

func (q quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{q.h.WithGroup(name)}
}

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
