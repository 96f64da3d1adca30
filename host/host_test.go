package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/automations/asowner"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(lockcheck.Checked(m))
}

// slow skips a test of seconds in a -short run, which is for a quick look
// at the package (README.md, Test); the full suite, and CI, run it.
func slow(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("takes seconds: runs without -short")
	}
}

// testHost is a host serving on a real WebSocket on 127.0.0.1.
type testHost struct {
	t     testing.TB
	h     *host.Host
	srv   *httptest.Server
	url   string
	state string // the state directory
	work  string // a working directory for sessions
}

type hostOption func(*host.Options)

// startHost starts a host with the script backend. It stops when the test
// ends.
func startHost(t testing.TB, state string, opts ...hostOption) *testHost {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		t.Fatal(err)
	}
	o := host.Options{
		StateDir:         state,
		Backends:         backends,
		Logger:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:          "test",
		DefaultDirectory: work,
		Auth:             &grants.Authenticator{Host: "test"},
		Automations:      host.AutomationOptions{NewRunner: runAsOwner},
	}
	// What Close killed must end, however slow the machine: past the
	// host's second for it, a loaded one reported agents that "did not
	// stop even when killed" (a guard against a hang, not a budget).
	host.WithKillWait(&o, hosttest.Timeout)
	for _, opt := range opts {
		opt(&o)
	}
	// A test that moves a fake clock past Limits.Idle had its quiet
	// clients cut by the connections' watchdog, which runs on that clock,
	// or not, as the machine's speed decided whether their answer to its
	// ping came first: unless the test sets an idle limit, there is none.
	if _, fake := o.Clock.(*clock.Fake); fake && o.Limits.Idle == 0 {
		o.Limits.Idle = -1
	}
	h, err := host.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(false, ""))
	th := &testHost{t: t, h: h, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http"), state: state, work: work}
	t.Cleanup(th.stop)
	return th
}

func (th *testHost) stop() {
	if th.h == nil {
		return
	}
	// Close's context is the grace running turns have, not a bound on
	// Close: a test stopping a host with a turn running waits it out.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := th.h.Close(ctx); err != nil {
		th.t.Errorf("closing the host: %v", err)
	}
	th.srv.Close()
	th.h = nil
}

// testWriter sends logs to the test's log, so they show with a failure.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client connects and initializes a client subscribed to root.
func (th *testHost) client(id string) *hosttest.Client {
	th.t.Helper()
	c := hosttest.Dial(th.t, th.url)
	c.Initialize(id, protocol.RootURI)
	return c
}

// newSession creates a script session and subscribes c to it and its
// default chat.
func (th *testHost) newSession(c *hosttest.Client, id string, config map[string]any) (sessionURI, chatURI string) {
	th.t.Helper()
	sessionURI = "ahp-session:/" + id
	params := map[string]any{
		"channel":            sessionURI,
		"provider":           "script",
		"workingDirectories": []string{"file://" + th.work},
	}
	if config != nil {
		params["config"] = config
	}
	c.MustCall("createSession", params)
	c.Subscribe(sessionURI)
	chatURI = protocol.DefaultChatURI(sessionURI)
	c.Subscribe(chatURI)
	return sessionURI, chatURI
}

// send starts a turn and waits for it to end. A turn the host refuses
// fails the test with the host's reason.
func send(t testing.TB, c *hosttest.Client, chat, turnID, text string) *protocol.ChatState {
	t.Helper()
	startTaken(t, c, chat, turnID, text)
	return waitTurnEnd(t, c, chat, turnID)
}

// startTaken starts a turn and waits for the host to take it. A turn the
// host refuses fails the test with the host's reason.
func startTaken(t testing.TB, c *hosttest.Client, chat, turnID, text string) {
	t.Helper()
	startTakenAt(t, c, chat, turnID, text, time.Now())
}

// startTakenAt is startTaken for a turn started at, by the client's clock.
func startTakenAt(t testing.TB, c *hosttest.Client, chat, turnID, text string, at time.Time) {
	t.Helper()
	seq := c.Dispatch(chat, &protocol.ChatTurnStartedAction{
		TurnID: turnID, StartedAt: protocol.FormatTime(at),
		Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	var refused string
	c.Wait("turn "+turnID+" to be taken", func(msgs []hosttest.Message) bool {
		for _, m := range msgs {
			if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq && e.Channel == chat {
				if e.RejectionReason != nil {
					refused = *e.RejectionReason
				}
				return true
			}
		}
		return false
	})
	if refused != "" {
		t.Fatalf("turn %s was refused: %s", turnID, refused)
	}
}

func waitTurnEnd(t testing.TB, c *hosttest.Client, chat, turnID string) *protocol.ChatState {
	t.Helper()
	st := c.WaitState(chat, "turn "+turnID+" to end", func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return len(cs.Turns) > 0 && cs.Turns[len(cs.Turns)-1].ID == turnID && cs.ActiveTurn == nil
	})
	return st.(*protocol.ChatState)
}

// text returns the markdown of a turn.
func text(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(md.Content)
		}
	}
	return b.String()
}

// errorText returns the message of the error a turn ended with, or "".
func errorText(t protocol.Turn) string {
	if e := t.ErrorPart(); e != nil {
		return e.Error.Message
	}
	return ""
}

// sameState compares a client's state with the host's snapshot. The chat
// reducer stamps modifiedAt with the clock of whoever applies it, so those
// are left out.
func sameState(t *testing.T, got, want protocol.ChannelState) {
	t.Helper()
	a, b := masked(t, got), masked(t, want)
	if !reflect.DeepEqual(a, b) {
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		t.Errorf("client state differs from the host's snapshot:\nclient: %s\n  host: %s", ga, gb)
	}
}

func masked(t *testing.T, s protocol.ChannelState) any {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "modifiedAt" {
					delete(x, k)
					continue
				}
				x[k] = strip(e)
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return v
	}
	return strip(v)
}

func TestTurnStreamsAndStateAgrees(t *testing.T) {
	t.Parallel()
	th := startHost(t, "")
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	cs := send(t, c, chat, "t1", "say hello there, general kenobi\nthink about it\ntitle A title")
	last := cs.Turns[len(cs.Turns)-1]
	if last.State != protocol.TurnStateComplete {
		t.Fatalf("turn state %s, error %+v", last.State, last.ErrorPart())
	}
	if got := text(last.ResponseParts); !strings.Contains(got, "hello there, general kenobi") {
		t.Errorf("turn text = %q", got)
	}
	c.WaitState(session, "the title", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Title == "A title"
	})

	// The session's entry of the chat follows the chat's own end.
	c.WaitState(session, "the chat's entry to be idle", func(s protocol.ChannelState) bool {
		return s.(*protocol.SessionState).Chats[0].Status.Activity() == protocol.StatusIdle
	})
	// A second client's fresh snapshots equal what the first computed.
	c2 := th.client("c2")
	sameState(t, c.State(chat), c2.Subscribe(chat).State)
	sameState(t, c.State(session), c2.Subscribe(session).State)
	sameState(t, c.State(protocol.RootURI), c2.Subscribe(protocol.RootURI).State)
}

// BenchmarkStreamToSubscribers streams a turn of 10,000 deltas to 100
// clients on real WebSockets and reports how long until the last client
// has the whole turn.
func BenchmarkStreamToSubscribers(b *testing.B) {
	th := startBenchHost(b)
	c := hosttest.Dial(b, th.url)
	c.Initialize("driver", protocol.RootURI)
	session := "ahp-session:/bench"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + th.work}})
	chat := protocol.DefaultChatURI(session)
	c.Subscribe(chat)
	startTurn(c, chat, "warm", "say warm up")
	c.WaitState(chat, "warm-up", func(s protocol.ChannelState) bool { return len(s.(*protocol.ChatState).Turns) == 1 })

	const subscribers = 100
	words := strings.TrimSpace(strings.Repeat("word ", 30000)) // 3 words a delta: 10,000 deltas
	readers := make([]*rawClient, subscribers)
	for i := range readers {
		readers[i] = dialRaw(b, th.url, chat)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		turn := fmt.Sprintf("t%d", i)
		startTurn(c, chat, turn, "say "+words)
		for _, r := range readers {
			r.waitFor(b, `"type":"chat/turnComplete","turnId":"`+turn+`"`)
		}
	}
	b.ReportMetric(float64(10000*subscribers*b.N)/b.Elapsed().Seconds(), "deliveries/s")
}

// runAsOwner runs automations as ahpd does (automations/asowner).
func runAsOwner(h host.RunnerHost) automations.Runner { return asowner.New(h) }
