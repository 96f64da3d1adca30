package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
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

// residency runs a host's residency checks on a fake clock, and hears
// them: a test moves the time and waits for a check instead of sleeping.
type residency struct {
	sleepAfter time.Duration
	limit      int
	clock      *clock.Fake
	passes     host.Passes
}

func newResidency(sleepAfter time.Duration, limit int) *residency {
	return &residency{sleepAfter: sleepAfter, limit: limit, clock: clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))}
}

func (r *residency) option() hostOption {
	return func(o *host.Options) {
		o.SleepAfter, o.ResidencyLimit, o.Clock = r.sleepAfter, r.limit, r.clock
		host.WithPasses(o, &r.passes)
	}
}

// advance moves the clock on by d, at least SleepAfter/2 (the host checks
// that often), and returns once a check has run at the new time.
func (r *residency) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if d < r.sleepAfter/2 || r.sleepAfter == 0 {
		t.Fatalf("advancing %v fires no residency check (SleepAfter %v)", d, r.sleepAfter)
	}
	r.clock.Advance(d)
	now := r.clock.Now()
	r.until(t, "a residency check at "+now.String(), func() bool {
		began, _ := r.passes.Latest()
		return !began.Before(now)
	}, nil)
}

// until waits, check by check, for cond; each change that can let a
// session sleep asks for a check.
// describe, if set, says why cond is false when it never came true.
func (r *residency) until(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	timeout := time.After(hosttest.Timeout)
	for {
		_, next := r.passes.Latest()
		if cond() {
			return
		}
		select {
		case <-next:
		case <-timeout:
			var state string
			if describe != nil {
				state = ": " + describe()
			}
			t.Fatalf("no residency check brought %s%s", what, state)
		}
	}
}

// untilStatus waits, check by check, for the session to have status want.
func (r *residency) untilStatus(t *testing.T, th *testHost, uri, want string) {
	t.Helper()
	r.until(t, uri+" "+want, func() bool { return status(t, th, uri) == want }, func() string { return th.h.Residency(uri) })
}

// waitActiveSessions waits for root's count of sessions running a turn.
func waitActiveSessions(c *hosttest.Client, n int64) {
	c.WaitState(protocol.RootURI, fmt.Sprint(n, " sessions running a turn"), func(s protocol.ChannelState) bool {
		rs := s.(*protocol.RootState)
		return rs.ActiveSessions != nil && *rs.ActiveSessions == n
	})
}

func status(t *testing.T, th *testHost, uri string) string {
	t.Helper()
	s, err := th.h.Status(uri)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leave closes c, initialized as clientID, and returns once the host has
// let go of the connection: nothing of it watches a session any more.
func (th *testHost) leave(c *hosttest.Client, clientID string) {
	th.t.Helper()
	done := th.h.Leaving(clientID)
	if len(done) == 0 {
		th.t.Fatalf("the host has no connection of %s", clientID)
	}
	c.Close()
	timeout := time.After(hosttest.Timeout)
	for _, d := range done {
		select {
		case <-d:
		case <-timeout:
			th.t.Fatalf("the host never let go of %s's connection", clientID)
		}
	}
}

// runAndLeave makes a session, runs a turn in it, and closes the client,
// so nothing watches it.
func runAndLeave(t *testing.T, th *testHost, id string) (session, chat string) {
	t.Helper()
	c := th.client("c-" + id)
	session, chat = th.newSession(c, id, nil)
	send(t, c, chat, "t1", "say hello from "+id)
	th.leave(c, "c-"+id)
	return session, chat
}

func TestQuietSessionSleepsAndWakes(t *testing.T) {
	var b *counted
	r := newResidency(time.Minute, 0)
	th := startHost(t, "", withCounted(&b), r.option())
	session, chat := runAndLeave(t, th, "s1")
	r.advance(t, r.sleepAfter/2)
	if status(t, th, session) != "active" {
		t.Fatal("the session fell asleep before SleepAfter of quiet")
	}
	r.advance(t, r.sleepAfter/2)
	if status(t, th, session) != "inactive" {
		t.Fatal("the session is awake after SleepAfter of quiet")
	}
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
	r.advance(t, 3*r.sleepAfter)
	if status(t, th, session) != "active" || b.running.Load() != 1 {
		t.Errorf("a watched session fell asleep (%s, %d agents)", status(t, th, session), b.running.Load())
	}
}

func TestWorkInHandKeepsASessionAwake(t *testing.T) {
	var b *counted
	r := newResidency(time.Minute, 0)
	th := startHost(t, "", withCounted(&b), r.option())
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	startTurn(c, chat, "t1", "say working\nwait 30s\nsay done")
	// Its agent is running (the session is ready) once it says something.
	c.WaitState(chat, "the turn to run", func(s protocol.ChannelState) bool {
		at := s.(*protocol.ChatState).ActiveTurn
		return at != nil && strings.Contains(text(at.ResponseParts), "working")
	})
	waitActiveSessions(c, 1)
	c.Notify("unsubscribe", map[string]any{"channel": chat})
	c.Notify("unsubscribe", map[string]any{"channel": session})
	// Requests are taken in line: once this is answered, nothing watches.
	c.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
	r.advance(t, 3*r.sleepAfter)
	if status(t, th, session) != "active" {
		t.Fatal("a session fell asleep with a turn running")
	}
	// The turn ends once the agent has stopped it: root's count of
	// sessions running a turn, which does not watch the session, says so.
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t1", Duration: 1})
	waitActiveSessions(c, 0)
	r.advance(t, r.sleepAfter)
	r.untilStatus(t, th, session, "inactive") // once the agent has stopped the turn
}

func TestConcurrentWakersStartOneAgent(t *testing.T) {
	var b *counted
	th := startHost(t, "", withCounted(&b))
	session, chat := runAndLeave(t, th, "s1")
	c := th.client("c1")
	suspendAsleep(t, c, session)
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
			r := newResidency(0, limit)
			th := startHost(t, "", withCounted(&b), r.option())
			var sessions []string
			for i := range limit {
				s, _ := runAndLeave(t, th, fmt.Sprintf("s%d", i))
				sessions = append(sessions, s)
				r.clock.Advance(time.Second) // each is used at a time of its own
			}
			// Use the first again: the second is now the least recent.
			c := th.client("again")
			c.Subscribe(sessions[0])
			th.leave(c, "again")
			r.clock.Advance(time.Second)
			extra, _ := runAndLeave(t, th, "extra")
			sessions = append(sessions, extra)

			r.untilStatus(t, th, sessions[1], "inactive")
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
	// Taken at once: a turn cancelled a moment ago winds down before the
	// next starts, it does not refuse it.
	startTaken(t, c, chat, "t2", "ask Anything?")
	c.WaitState(chat, "the question", func(s protocol.ChannelState) bool {
		return s.(*protocol.ChatState).Status.Activity() == protocol.StatusInputNeeded
	})
	th.leave(c, "c1")
	c = th.client("c2")
	c.MustCall("ahpd/suspendSession", map[string]any{"channel": session})
	if status(t, th, session) != "inactive" || b.running.Load() != 0 {
		t.Errorf("after suspend: %s, %d agents", status(t, th, session), b.running.Load())
	}
	cs := c.Subscribe(chat).State.(*protocol.ChatState)
	if last := cs.Turns[len(cs.Turns)-1]; last.ID != "t2" || last.State != protocol.TurnStateCancelled {
		t.Errorf("the waiting turn ended %s %s", last.ID, last.State)
	}
	// Subscribing woke it; once c2 is gone it sleeps again, and suspending
	// it then changes nothing.
	th.leave(c, "c2")
	c = th.client("c3")
	suspendAsleep(t, c, session)
	if raw := c.MustCall("ahpd/suspendSession", map[string]any{"channel": session}); string(raw) != `{"status":"inactive"}` {
		t.Errorf("suspending a sleeping session: %s", raw)
	}
	if n := b.running.Load(); n != 0 {
		t.Errorf("%d agents after suspending a sleeping session", n)
	}
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

// suspendAsleep suspends a session nothing watches, which puts it to sleep.
func suspendAsleep(t *testing.T, c *hosttest.Client, session string) {
	t.Helper()
	if raw := c.MustCall("ahpd/suspendSession", map[string]any{"channel": session}); string(raw) != `{"status":"inactive"}` {
		t.Fatalf("suspending %s: %s, want it asleep", session, raw)
	}
}
