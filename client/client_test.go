package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const token = "s3cret"

// daemon is a host with the script backend behind a real WebSocket on
// 127.0.0.1. restart replaces the host with a new one on the same state
// directory and address, as a daemon restarting does.
type daemon struct {
	t       *testing.T
	srv     *httptest.Server
	url     string
	state   string
	work    string
	current atomic.Pointer[host.Host]
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	d := &daemon{t: t, state: t.TempDir()}
	d.work = filepath.Join(d.state, "work")
	if err := os.MkdirAll(d.work, 0o755); err != nil {
		t.Fatal(err)
	}
	d.current.Store(d.newHost())
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.current.Load().Handler(false, "").ServeHTTP(w, r)
	}))
	d.url = "ws" + strings.TrimPrefix(d.srv.URL, "http")
	t.Cleanup(func() {
		d.stopHost()
		d.srv.Close()
	})
	return d
}

func (d *daemon) newHost() *host.Host {
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(d.state, "transcripts", "script"))); err != nil {
		d.t.Fatal(err)
	}
	h, err := host.New(host.Options{
		StateDir:         d.state,
		Sessions:         "file",
		Backends:         backends,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version:          "test",
		DefaultDirectory: d.work,
		Auth:             &grants.Authenticator{Host: "test", ConnectionToken: token},
	})
	if err != nil {
		d.t.Fatal(err)
	}
	return h
}

func (d *daemon) stopHost() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.current.Load().Close(ctx); err != nil {
		d.t.Errorf("closing the host: %v", err)
	}
}

func (d *daemon) restart() {
	d.stopHost()
	d.current.Store(d.newHost())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, d *daemon, opts *client.Options) *client.Client {
	t.Helper()
	if opts == nil {
		opts = &client.Options{}
	}
	opts.Token = token
	c, err := client.Dial(testContext(t), d.url, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newSession creates a script session, subscribes to it and its default
// chat, and returns their URIs.
func newSession(t *testing.T, c *client.Client, d *daemon, id string) (session, chat string) {
	t.Helper()
	ctx := testContext(t)
	session = "ahp-session:/" + id
	err := c.Call(ctx, "createSession", protocol.CreateSessionParams{Channel: session, Provider: new("script"),
		WorkingDirectories: []string{"file://" + d.work}}, nil)
	if err != nil {
		t.Fatalf("createSession: %v", err)
	}
	chat = protocol.DefaultChatURI(session)
	for _, uri := range []string{session, chat} {
		if _, err := c.Subscribe(ctx, uri); err != nil {
			t.Fatal(err)
		}
	}
	return session, chat
}

func turn(id, text string) *protocol.ChatTurnStartedAction {
	return &protocol.ChatTurnStartedAction{TurnID: id, StartedAt: client.Now(),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}}
}

// ended waits for the chat's turn id to end and returns the chat.
func ended(t *testing.T, c *client.Client, chat, id string) *protocol.ChatState {
	t.Helper()
	s, err := c.WaitState(testContext(t), chat, func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == id
	})
	if err != nil {
		t.Fatalf("waiting for turn %s: %v", id, err)
	}
	return s.(*protocol.ChatState)
}

func text(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if m, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

func TestTurnStreamsIntoState(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	if c.Version() != "1.0.0" {
		t.Errorf("version %q, want 1.0.0", c.Version())
	}
	root, ok := c.State(protocol.RootURI).(*protocol.RootState)
	if !ok || len(root.Agents) == 0 || root.Agents[0].Provider != "script" {
		t.Fatalf("root state %+v", c.State(protocol.RootURI))
	}
	_, chat := newSession(t, c, d, "s1")
	if err := c.DispatchWait(testContext(t), chat, turn("t1", "say hello there")); err != nil {
		t.Fatalf("turn refused: %v", err)
	}
	cs := ended(t, c, chat, "t1")
	if got := cs.Turns[0]; got.State != protocol.TurnStateComplete || !strings.Contains(text(got.ResponseParts), "hello there") {
		t.Errorf("turn %s, text %q", got.State, text(got.ResponseParts))
	}
	// The same actions came as events, in order, ending with the turn's end.
	var last protocol.ActionType
	for last != protocol.ActionChatTurnComplete {
		select {
		case ev := <-c.Events():
			if ev.Action != nil && ev.Action.Channel == chat {
				last = ev.Action.Action.Type()
			}
		default:
			t.Fatalf("no chat/turnComplete among the events (last %s)", last)
		}
	}
}

func TestVersions(t *testing.T) {
	d := startDaemon(t)
	tests := []struct {
		name     string
		offer    []string
		want     string
		wantCode protocol.ErrorCode
	}{
		{"default offer", nil, "1.0.0", 0},
		{"0.9 only", []string{"0.9.0"}, "0.9.0", 0},
		{"older only", []string{"0.8.0"}, "", protocol.CodeUnsupportedProtocolVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.Dial(testContext(t), d.url, &client.Options{Token: token, Versions: tt.offer})
			if tt.wantCode != 0 {
				if client.ErrorCode(err) != tt.wantCode {
					t.Fatalf("dial = %v, want code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Version() != tt.want {
				t.Errorf("version %q, want %q", c.Version(), tt.want)
			}
		})
	}
}

func TestWrongToken(t *testing.T) {
	d := startDaemon(t)
	_, err := client.Dial(testContext(t), d.url, &client.Options{Token: "nope"})
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("dial with a wrong token = %v, want ErrUnauthorized", err)
	}
}

func TestErrorsCarryTheirCode(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	ctx := testContext(t)
	tests := []struct {
		method string
		params any
		want   protocol.ErrorCode
	}{
		{"noSuchMethod", struct{}{}, protocol.CodeMethodNotFound},
		{"createSession", map[string]any{"channel": "ahp-session:/x", "provider": "nobody"}, protocol.CodeProviderNotFound},
		{"ahpd/sessionStatus", map[string]any{"channel": "ahp-session:/none"}, protocol.CodeProviderNotFound},
	}
	for _, tt := range tests {
		err := c.Call(ctx, tt.method, tt.params, nil)
		var rpcErr *client.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != tt.want || rpcErr.Message == "" {
			t.Errorf("%s = %v, want code %d", tt.method, err, tt.want)
		}
	}
	// The connection is still good after errors.
	if err := c.Call(ctx, "ping", struct{}{}, nil); err != nil {
		t.Errorf("ping after errors: %v", err)
	}
}

func TestRefusedActionSaysWhy(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	_, chat := newSession(t, c, d, "s1")
	err := c.DispatchWait(testContext(t), chat, &protocol.ChatTurnCancelledAction{TurnID: "none", Duration: 1})
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reason == "" || rej.Type != protocol.ActionChatTurnCancelled {
		t.Fatalf("cancelling no turn = %v, want a RejectedError with a reason", err)
	}
	// On a channel not watched there is no echo to wait for.
	d2, err := c.Dispatch(testContext(t), "ahp-session:/elsewhere", &protocol.SessionTitleChangedAction{Title: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Wait(testContext(t)); err == nil || !strings.Contains(err.Error(), "not watched") {
		t.Errorf("waiting on an unwatched channel = %v", err)
	}
}

// TestReconnectReplaysWhatWasMissed drops a client's connection while
// another client runs a turn; reconnecting brings its state to the same
// place as the other's.
func TestReconnectReplaysWhatWasMissed(t *testing.T) {
	d := startDaemon(t)
	a := dial(t, d, nil)
	_, chat := newSession(t, a, d, "s1")
	if err := a.DispatchWait(testContext(t), chat, turn("t1", "say one")); err != nil {
		t.Fatal(err)
	}
	ended(t, a, chat, "t1")

	client.DropConnection(a)
	<-a.Disconnected()
	if err := a.Call(testContext(t), "ping", struct{}{}, nil); !errors.Is(err, client.ErrDisconnected) {
		t.Errorf("a call after the drop = %v, want ErrDisconnected", err)
	}
	b := dial(t, d, nil)
	if _, err := b.Subscribe(testContext(t), chat); err != nil {
		t.Fatal(err)
	}
	if err := b.DispatchWait(testContext(t), chat, turn("t2", "say two")); err != nil {
		t.Fatal(err)
	}
	want := ended(t, b, chat, "t2")

	if err := a.Reconnect(testContext(t)); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	got := ended(t, a, chat, "t2")
	if len(got.Turns) != 2 || text(got.Turns[1].ResponseParts) != text(want.Turns[1].ResponseParts) {
		t.Errorf("after reconnecting: %d turns, second %q; want %q", len(got.Turns), text(got.Turns[1].ResponseParts), text(want.Turns[1].ResponseParts))
	}
	// What was missed came as events too.
	seen := false
	for len(a.Events()) > 0 {
		ev := <-a.Events()
		if ev.Action != nil && ev.Action.Channel == chat && ev.Action.Action.Type() == protocol.ActionChatTurnStarted {
			seen = seen || ev.Action.Action.(*protocol.ChatTurnStartedAction).TurnID == "t2"
		}
	}
	if !seen {
		t.Error("the replayed turn start was not among the events")
	}
}

// TestReconnectToARestartedHost: a host with no journal forgets its
// clients when it stops (-32008), so the client initializes anew and
// takes fresh snapshots. (With a journal it is replayed the gap: host's
// TestReconnectReplaysAfterRestart.)
func TestReconnectToARestartedHost(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	session, chat := newSession(t, c, d, "s1")
	if err := c.DispatchWait(testContext(t), chat, turn("t1", "say kept")); err != nil {
		t.Fatal(err)
	}
	ended(t, c, chat, "t1")
	d.restart()
	<-c.Disconnected()
	if err := c.Reconnect(testContext(t)); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if c.Version() != "1.0.0" {
		t.Errorf("version after a fresh start: %q", c.Version())
	}
	cs, ok := c.State(chat).(*protocol.ChatState)
	if !ok || len(cs.Turns) != 1 || !strings.Contains(text(cs.Turns[0].ResponseParts), "kept") {
		t.Fatalf("chat after the restart: %+v", c.State(chat))
	}
	if c.State(session) == nil || c.State(protocol.RootURI) == nil {
		t.Error("the session or root is no longer watched")
	}
	// And the client works on: a new turn streams in.
	if err := c.DispatchWait(testContext(t), chat, turn("t2", "say again")); err != nil {
		t.Fatal(err)
	}
	ended(t, c, chat, "t2")
}

// TestEventsAreBounded: a reader that does not keep up loses events, not
// state, and the connection goes on.
func TestEventsAreBounded(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, &client.Options{EventBuffer: 2})
	_, chat := newSession(t, c, d, "s1")
	if err := c.DispatchWait(testContext(t), chat, turn("t1", "say a b c d e f g h i j k l m n o p")); err != nil {
		t.Fatal(err)
	}
	cs := ended(t, c, chat, "t1")
	if !strings.Contains(text(cs.Turns[0].ResponseParts), "o p") {
		t.Errorf("state lost text: %q", text(cs.Turns[0].ResponseParts))
	}
	<-c.Events()
	<-c.Events()
	if err := c.Call(testContext(t), "ping", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	// The next event says how many were dropped.
	if err := c.DispatchWait(testContext(t), chat, turn("t2", "say more")); err != nil {
		t.Fatal(err)
	}
	ev := <-c.Events()
	if ev.Dropped == 0 {
		t.Error("no event was counted dropped")
	}
}

func TestCloseEndsEverything(t *testing.T) {
	d := startDaemon(t)
	c := dial(t, d, nil)
	_, chat := newSession(t, c, d, "s1")
	waited := make(chan error, 1)
	go func() {
		_, err := c.WaitState(context.Background(), chat, func(protocol.ChannelState) bool { return false })
		waited <- err
	}()
	c.Close()
	if err := <-waited; !errors.Is(err, client.ErrClosed) {
		t.Errorf("a wait across Close = %v, want ErrClosed", err)
	}
	for range c.Events() {
	}
	if err := c.Call(context.Background(), "ping", struct{}{}, nil); !errors.Is(err, client.ErrClosed) {
		t.Errorf("a call after Close = %v", err)
	}
}

// pipeEnd is one end of a pair of pipes: what a program has of another
// it started, its standard output and input.
type pipeEnd struct {
	io.Reader
	io.WriteCloser
	r io.Closer
}

func (p pipeEnd) Close() error { return errors.Join(p.WriteCloser.Close(), p.r.Close()) }

// A client over a host's standard input and output, as a program that
// runs `ahpd --stdio` has it: a turn streams into its state the same,
// and a stream cannot be reconnected.
func TestOpenOverAStream(t *testing.T) {
	d := startDaemon(t)
	toHostR, toHostW := io.Pipe()
	fromHostR, fromHostW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- d.current.Load().ServeStdio(toHostR, fromHostW)
		fromHostW.Close()
	}()
	c, err := client.Open(testContext(t), pipeEnd{fromHostR, toHostW, fromHostR}, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_, chat := newSession(t, c, d, "s1")
	if err := c.DispatchWait(testContext(t), chat, turn("t1", "say over a pipe")); err != nil {
		t.Fatalf("turn refused: %v", err)
	}
	if cs := ended(t, c, chat, "t1"); !strings.Contains(text(cs.Turns[0].ResponseParts), "over a pipe") {
		t.Errorf("turn text %q", text(cs.Turns[0].ResponseParts))
	}
	if err := c.Reconnect(testContext(t)); !errors.Is(err, client.ErrStreamUsed) {
		t.Errorf("reconnecting a stream: %v, want ErrStreamUsed", err)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Errorf("the host's side: %v", err)
	}
}
