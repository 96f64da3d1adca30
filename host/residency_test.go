package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// counted is the script backend with its agents counted: how many started
// and how many are running now.
type counted struct {
	plugins.Backend
	starts  atomic.Int64
	running atomic.Int64
}

func (b *counted) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	a, err := b.Backend.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	b.starts.Add(1)
	b.running.Add(1)
	return &countedAgent{Agent: a, b: b}, nil
}

type countedAgent struct {
	plugins.Agent
	b    *counted
	once sync.Once
}

func (a *countedAgent) Close() error {
	a.once.Do(func() { a.b.running.Add(-1) })
	return a.Agent.Close()
}

func (a *countedAgent) CanResume() bool { return a.Agent.(plugins.Resumable).CanResume() }

func (a *countedAgent) SetConfig(v protocol.Object) { a.Agent.(plugins.Reconfigurer).SetConfig(v) }

// withCounted runs the host on a counted script backend.
func withCounted(b **counted) hostOption {
	return func(o *host.Options) {
		c := &counted{Backend: script.New(filepath.Join(o.StateDir, "transcripts", "script"))}
		reg := plugins.NewRegistry()
		if err := reg.Register(c); err != nil {
			panic(err)
		}
		o.Backends = reg
		*b = c
	}
}

func withResidency(sleepAfter time.Duration, limit int) hostOption {
	return func(o *host.Options) {
		o.SleepAfter = sleepAfter
		o.ResidencyLimit = limit
	}
}

func status(t *testing.T, th *testHost, uri string) string {
	t.Helper()
	s, err := th.h.Status(uri)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitStatus(t *testing.T, th *testHost, uri, want string) {
	t.Helper()
	deadline := time.Now().Add(hosttest.Timeout)
	for status(t, th, uri) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %s, want %s", uri, status(t, th, uri), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runAndLeave makes a session, runs a turn in it, and closes the client,
// so nothing watches it.
func runAndLeave(t *testing.T, th *testHost, id string) (session, chat string) {
	t.Helper()
	c := th.client("c-" + id)
	session, chat = th.newSession(c, id, nil)
	send(t, c, chat, "t1", "say hello from "+id)
	c.Close()
	return session, chat
}

func TestQuietSessionSleepsAndWakes(t *testing.T) {
	var b *counted
	th := startHost(t, "", withCounted(&b), withResidency(60*time.Millisecond, 0))
	session, chat := runAndLeave(t, th, "s1")
	waitStatus(t, th, session, "inactive")
	if n := b.running.Load(); n != 0 {
		t.Fatalf("%d agents still run after the session fell asleep", n)
	}

	// A client coming back finds the conversation, and the next turn
	// resumes it in a new agent.
	c := th.client("back")
	c.Subscribe(session)
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if len(cs.Turns) != 1 || cs.Turns[0].ID != "t1" {
		t.Fatalf("after waking the chat holds %d turns", len(cs.Turns))
	}
	if status(t, th, session) != "active" {
		t.Error("a subscribed session is not active")
	}
	cs = send(t, c, chat, "t2", "say again")
	if len(cs.Turns) != 2 || b.starts.Load() != 2 {
		t.Errorf("%d turns, %d agent starts; want 2 and 2", len(cs.Turns), b.starts.Load())
	}
	// Watched, it stays awake however quiet.
	time.Sleep(200 * time.Millisecond)
	if status(t, th, session) != "active" || b.running.Load() != 1 {
		t.Errorf("a watched session fell asleep (%s, %d agents)", status(t, th, session), b.running.Load())
	}
}

func TestWorkInHandKeepsASessionAwake(t *testing.T) {
	var b *counted
	th := startHost(t, "", withCounted(&b), withResidency(50*time.Millisecond, 0))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "say working\nwait 400ms\nsay done")
	c.WaitState(chat, "the turn to run", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).ActiveTurn != nil
	})
	c.Notify("unsubscribe", map[string]any{"channel": chat})
	c.Notify("unsubscribe", map[string]any{"channel": session})
	time.Sleep(250 * time.Millisecond)
	if status(t, th, session) != "active" {
		t.Fatal("a session fell asleep with a turn running")
	}
	waitStatus(t, th, session, "inactive") // once the turn has ended
}

func TestConcurrentWakersStartOneAgent(t *testing.T) {
	var b *counted
	th := startHost(t, "", withCounted(&b))
	session, chat := runAndLeave(t, th, "s1")
	c := th.client("c1")
	suspendUntilAsleep(t, c, session)
	if status(t, th, session) != "inactive" || b.running.Load() != 0 {
		t.Fatalf("suspend left %s with %d agents", status(t, th, session), b.running.Load())
	}
	before := b.starts.Load()
	c.Subscribe(chat)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { c.MustCall("ahpd/resumeSession", map[string]any{"channel": session}) })
	}
	startTurn(c, chat, "t2", "say woken")
	wg.Wait()
	waitTurnEnd(t, c, chat, "t2")
	if n := b.starts.Load() - before; n != 1 {
		t.Errorf("waking started %d agents, want 1", n)
	}
}

// TestResidencyLimit checks that past the limit the least recently used
// session goes, and only that one.
func TestResidencyLimit(t *testing.T) {
	for _, limit := range []int{2, 5} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			var b *counted
			th := startHost(t, "", withCounted(&b), withResidency(0, limit))
			var sessions []string
			for i := range limit {
				s, _ := runAndLeave(t, th, fmt.Sprintf("s%d", i))
				sessions = append(sessions, s)
			}
			// Use the first again: the second is now the least recent.
			c := th.client("again")
			c.Subscribe(sessions[0])
			c.Close()
			extra, _ := runAndLeave(t, th, "extra")
			sessions = append(sessions, extra)

			waitStatus(t, th, sessions[1], "inactive")
			for i, s := range sessions {
				if i != 1 && status(t, th, s) != "active" {
					t.Errorf("session %d went asleep, want only session 1", i)
				}
			}
			if n := b.running.Load(); n != int64(limit) {
				t.Errorf("%d agents run, want %d", n, limit)
			}
		})
	}
}

func TestStatusProbe(t *testing.T) {
	th := startHost(t, "")
	c := th.client("c1")
	_, err := c.Call("ahpd/sessionStatus", map[string]any{"channel": "ahp-session:/nobody"})
	if err == nil || err.Code != -32002 {
		t.Fatalf("unknown session: %v", err)
	}
	var data struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(err.Data, &data) != nil || data.SessionID != "nobody" {
		t.Errorf("error data %s does not name the session", err.Data)
	}
	session, _ := th.newSession(c, "s1", nil)
	raw := c.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
	if string(raw) != `{"status":"active"}` {
		t.Errorf("status = %s", raw)
	}
}

func TestSuspend(t *testing.T) {
	var b *counted
	th := startHost(t, "", withCounted(&b))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	// A running turn with nothing open is busy.
	startTurn(c, chat, "t1", "wait 30s")
	c.WaitState(chat, "the turn", func(s protocol.ChannelState) bool { return s.(*protocol.ChatState).ActiveTurn != nil })
	if _, err := c.Call("ahpd/suspendSession", map[string]any{"channel": session}); err == nil || err.Code != -32004 {
		t.Errorf("suspending a busy session: %v, want -32004", err)
	}
	if raw := c.MustCall("ahpd/suspendSession", map[string]any{"channel": session, "ifIdle": true}); string(raw) != `{"status":"active"}` {
		t.Errorf("ifIdle on a busy session: %s", raw)
	}
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 1})
	waitTurnEnd(t, c, chat, "t1")

	// A turn waiting on a question is interrupted, then the session sleeps.
	sendEventuallyStart(t, c, chat, "t2", "ask Anything?")
	c.WaitState(chat, "the question", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).Status.Activity() == protocol.StatusInputNeeded
	})
	c.Close()
	c = th.client("c2")
	c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	if status(t, th, session) != "inactive" || b.running.Load() != 0 {
		t.Errorf("after suspend: %s, %d agents", status(t, th, session), b.running.Load())
	}
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if last := cs.Turns[len(cs.Turns)-1]; last.ID != "t2" || last.State != protocol.TurnStateCancelled {
		t.Errorf("the waiting turn ended %s %s", last.ID, last.State)
	}
	// Subscribing woke it; once c2 is gone (the server sees the close a
	// moment later) it sleeps again, and suspending it then changes nothing.
	c.Close()
	c = th.client("c3")
	suspendUntilAsleep(t, c, session)
	if raw := c.MustCall("ahpd/suspendSession", map[string]any{"channel": session}); string(raw) != `{"status":"inactive"}` {
		t.Errorf("suspending a sleeping session: %s", raw)
	}
	if n := b.running.Load(); n != 0 {
		t.Errorf("%d agents after suspending a sleeping session", n)
	}
}

// sendEventuallyStart starts a turn, retrying while the last one winds down.
func sendEventuallyStart(t *testing.T, c *hosttest.Client, chat, turnID, text string) {
	t.Helper()
	deadline := time.Now().Add(hosttest.Timeout)
	for time.Now().Before(deadline) {
		seq := c.Dispatch(chat, &protocol.ChatTurnStartedAction{
			TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		})
		var refused bool
		c.Wait("the turn to be taken", func(msgs []hosttest.Message) bool {
			for _, m := range msgs {
				if e := m.Envelope; e != nil && e.Origin != nil && e.Origin.ClientSeq == seq {
					refused = e.RejectionReason != nil
					return true
				}
			}
			return false
		})
		if !refused {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("turn %s was never taken", turnID)
}

// BenchmarkStatusProbe measures the probe of an active session: an
// in-memory lookup that allocates nothing.
func BenchmarkStatusProbe(b *testing.B) {
	th := startBenchHost(b)
	c := hosttest.Dial(b, th.url)
	c.Initialize("bench")
	session := "ahp-session:/probe"
	c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + th.work}})
	b.ReportAllocs()
	for b.Loop() {
		if s, err := th.h.Status(session); err != nil || s != "active" {
			b.Fatal(s, err)
		}
	}
}

// BenchmarkSleepingSessionMemory reports the heap a sleeping session holds:
// its state, its chats without their turns, its record. The turns are on
// disk, in the transcript.
func BenchmarkSleepingSessionMemory(b *testing.B) {
	for b.Loop() {
		th := startBenchHost(b)
		heap := func() uint64 {
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		make := func(from, to int) {
			for i := from; i < to; i++ {
				c := hosttest.Dial(b, th.url)
				c.Initialize("m")
				session := fmt.Sprintf("ahp-session:/m%d", i)
				chat := protocol.DefaultChatURI(session)
				c.MustCall("createSession", map[string]any{"channel": session, "provider": "script",
					"workingDirectories": []string{"file://" + th.work}})
				c.Subscribe(chat)
				startTurn(c, chat, "t1", "say a short answer to a short question")
				c.WaitState(chat, "the turn", func(s protocol.ChannelState) bool {
					return len(s.(*protocol.ChatState).Turns) == 1
				})
				c.Close()
				c = hosttest.Dial(b, th.url)
				c.Initialize("m")
				c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
				c.Close()
			}
		}
		const small, large = 100, 600
		make(0, small)
		before := heap()
		make(small, large)
		after := heap()
		b.ReportMetric(float64(after-before)/float64(large-small)/1024, "KB/session")
	}
}

// suspendUntilAsleep suspends a session until it is asleep: a client that
// left a moment ago may still watch it until the host sees it go, and a
// watched session keeps its turns.
func suspendUntilAsleep(t *testing.T, c *hosttest.Client, session string) {
	t.Helper()
	deadline := time.Now().Add(hosttest.Timeout)
	for string(c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})) != `{"status":"inactive"}` {
		if time.Now().After(deadline) {
			t.Fatal("the session never went to sleep")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
