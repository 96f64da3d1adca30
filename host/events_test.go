package host_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/events"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/webhooks"
)

// recorder is an events.Sink that keeps what it is told, in order.
type recorder struct{ ch chan events.Event }

func newRecorder() *recorder { return &recorder{ch: make(chan events.Event, 1000)} }

func (r *recorder) Event(ev events.Event) { r.ch <- ev }

// next returns the next event, which must be of kind k.
func (r *recorder) next(t *testing.T, k events.Kind) events.Event {
	t.Helper()
	select {
	case ev := <-r.ch:
		if ev.Kind != k {
			t.Fatalf("event %s (%+v), want %s", ev.Kind, ev, k)
		}
		return ev
	case <-time.After(hosttest.Timeout):
		t.Fatalf("no %s event", k)
		return events.Event{}
	}
}

func withEvents(sink events.Sink) hostOption {
	return func(o *host.Options) { o.Events = sink }
}

// TestEventsOfTurns: the host tells its sink of each turn that ends
// complete or in error, and of each request a turn waits on a person
// for, once, with what a receiver needs to act on it; of a cancelled turn
// it says nothing. A session's events come in the order they happened.
func TestEventsOfTurns(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	th := startHost(t, "", withEvents(rec))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	send(t, c, chat, "t1", "title Build fixer\nsay hi")
	ev := rec.next(t, events.TurnCompleted)
	if ev.Session.URI != session || ev.Session.ID != "s1" || ev.Session.Title != "Build fixer" || ev.Session.Provider != "script" ||
		ev.Chat != chat || ev.Turn == nil || ev.Turn.ID != "t1" || ev.Turn.State != protocol.TurnStateComplete || ev.Time.IsZero() {
		t.Errorf("turn_completed: %+v %+v", ev, ev.Turn)
	}

	send(t, c, chat, "t2", "fail boom")
	ev = rec.next(t, events.TurnFailed)
	if ev.Turn.ID != "t2" || ev.Turn.State != protocol.TurnStateError || ev.Turn.Error == nil || !strings.Contains(ev.Turn.Error.Message, "boom") {
		t.Errorf("turn_failed: %+v %+v", ev.Turn, ev.Turn.Error)
	}

	// A question: told once, though an answer typed into it changes it.
	startTaken(t, c, chat, "t3", "ask Which file?")
	id := asking(t, c, chat)
	ev = rec.next(t, events.NeedsInput)
	if r := ev.Request; r == nil || r.ID != id || r.Kind != events.RequestQuestion || r.Text != "Which file?" || ev.Turn.ID != "t3" || ev.Chat != chat {
		t.Errorf("needs_input: %+v %+v", ev, ev.Request)
	}
	draft := &protocol.ChatInputAnswered{State: "draft", Value: &protocol.ChatInputTextAnswerValue{Value: "no"}}
	c.Dispatch(chat, &protocol.ChatInputAnswerChangedAction{RequestID: id, QuestionID: "answer", Answer: draft})
	answer(c, chat, id, "notes.txt")
	waitTurnEnd(t, c, chat, "t3")
	if ev = rec.next(t, events.TurnCompleted); ev.Turn.ID != "t3" {
		t.Errorf("after the answer: %+v", ev.Turn)
	}

	// A tool call to approve.
	startTaken(t, c, chat, "t4", "write a.txt alpha")
	tool := pendingTool(t, c, chat)
	ev = rec.next(t, events.NeedsInput)
	if r := ev.Request; r == nil || r.ID != tool || r.Kind != events.RequestApproval || r.Tool == "" || !strings.Contains(r.Text, "a.txt") {
		t.Errorf("needs_input for a tool call: %+v", ev.Request)
	}
	c.Dispatch(chat, &protocol.ChatToolCallConfirmedAction{TurnID: "t4", ToolCallID: tool, Approved: true,
		Confirmed: new(protocol.ToolCallConfirmationReasonUserAction)})
	waitTurnEnd(t, c, chat, "t4")
	rec.next(t, events.TurnCompleted)

	// A cancelled turn is told nothing of: the next event is the turn
	// after it.
	startTaken(t, c, chat, "t5", "say started\nwait 30s")
	saying(t, c, chat, "started")
	c.Dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: "t5"})
	waitTurnEnd(t, c, chat, "t5")
	send(t, c, chat, "t6", "say after")
	if ev = rec.next(t, events.TurnCompleted); ev.Turn.ID != "t6" {
		t.Errorf("after a cancelled turn, the next event is of %s", ev.Turn.ID)
	}
}

// hookReceiver is a webhook receiver on 127.0.0.1 that verifies every
// delivery; hold, when set, is waited on before each answer.
type hookReceiver struct {
	srv  *httptest.Server
	got  chan webhooks.Body
	hold chan struct{}
}

var hookSecret = []byte("a secret of thirty-two bytes....")

func newHookReceiver(t *testing.T, hold chan struct{}) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{got: make(chan webhooks.Body, 1000), hold: hold}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if err := webhooks.Verify(hookSecret, r.Header, raw, time.Now(), 0); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
		}
		var b webhooks.Body
		if err := json.Unmarshal(raw, &b); err != nil || b.ID != r.Header.Get(webhooks.HeaderDelivery) || string(b.Event) != r.Header.Get(webhooks.HeaderEvent) {
			t.Errorf("a delivery's body %s (%v) disagrees with its headers %v", raw, err, r.Header)
		}
		if rc.hold != nil {
			<-rc.hold
		}
		rc.got <- b
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) next(t *testing.T, k events.Kind) webhooks.Body {
	t.Helper()
	select {
	case b := <-rc.got:
		if b.Event != k {
			t.Fatalf("delivered %s (%+v), want %s", b.Event, b, k)
		}
		return b
	case <-time.After(hosttest.Timeout):
		t.Fatalf("no %s delivered", k)
		return webhooks.Body{}
	}
}

// openHooks opens a dispatcher for one webhook to url; it closes after
// the host (a cleanup registered before startHost's runs after it).
func openHooks(t *testing.T, url string, maxPending int) *webhooks.Dispatcher {
	t.Helper()
	ws, err := webhooks.Check([]webhooks.Spec{{Name: "rx", URL: url, Secret: string(hookSecret), MaxPending: maxPending,
		Events: []string{"needs_input", "turn_completed", "turn_failed", "automation_run_finished"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := webhooks.Open(webhooks.Options{Webhooks: ws, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("closing the webhooks: %v", err)
		}
	})
	return d
}

// TestWebhooksEndToEnd: a host with the script backend and webhooks to a
// receiver on 127.0.0.1: a question, a turn that completes, one that
// fails and an automation's run arrive signed, in the order they
// happened, saying what a receiver needs; ahpd/webhookLog lists them.
func TestWebhooksEndToEnd(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t, nil)
	hooks := openHooks(t, rc.srv.URL+"/hook", 0)
	clock := automations.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	th := startHost(t, "", withEvents(hooks), func(o *host.Options) { o.Automations.Clock = clock })
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)

	startTaken(t, c, chat, "t1", "ask Which file?")
	id := asking(t, c, chat)
	b := rc.next(t, events.NeedsInput)
	if b.Session == nil || b.Session.URI != session || b.Chat != chat || b.Turn == nil || b.Turn.ID != "t1" ||
		b.Request == nil || b.Request.ID != id || b.Request.Kind != "question" || b.Request.Text != "Which file?" ||
		b.Request.AnswerPath != "/v1/sessions/s1/questions/"+id || len(b.Request.Questions) != 1 {
		t.Errorf("needs_input: %+v", b)
	}
	answer(c, chat, id, "notes.txt")
	waitTurnEnd(t, c, chat, "t1")
	rc.next(t, events.TurnCompleted)

	send(t, c, chat, "t2", "say hi")
	if b = rc.next(t, events.TurnCompleted); b.Turn.ID != "t2" || b.Turn.State != "complete" || b.Turn.DurationMs == nil {
		t.Errorf("turn_completed: %+v", b.Turn)
	}
	send(t, c, chat, "t3", "fail boom")
	if b = rc.next(t, events.TurnFailed); b.Turn.State != "error" || b.Turn.Error == nil || !strings.Contains(b.Turn.Error.Message, "boom") {
		t.Errorf("turn_failed: %+v", b.Turn)
	}

	// An automation's run: its turn, then the run.
	c.Subscribe(automations.CatalogueURI)
	provider := "script"
	const auto = "ahp-automation:/nightly"
	c.Dispatch(automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: auto, Definition: protocol.AutomationDefinition{
		Title:    "Nightly",
		Message:  protocol.Message{Text: "say ran", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session:  protocol.AutomationSessionTemplate{Provider: &provider, WorkingDirectories: []protocol.URI{"file://" + th.work}},
		Enabled:  true,
		Triggers: []protocol.AutomationTrigger{},
	}})
	c.WaitState(automations.CatalogueURI, "the automation", func(st protocol.ChannelState) bool {
		return len(st.(*protocol.AutomationState).Entries) == 1
	})
	raw := c.MustCall("runAutomation", map[string]any{"channel": automations.CatalogueURI, "automation": auto, "requestId": "now"})
	var run protocol.RunAutomationResult
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatal(err)
	}
	turn := rc.next(t, events.TurnCompleted)
	b = rc.next(t, events.AutomationRunFinished)
	if b.Run == nil || b.Run.URI != run.Resource || b.Run.Automation != auto || b.Run.Outcome != "completed" ||
		b.Session == nil || turn.Session == nil || b.Session.URI != turn.Session.URI {
		t.Errorf("automation_run_finished: %+v %+v, after the turn of %+v", b.Run, b.Session, turn.Session)
	}

	var log webhooks.Log
	if err := json.Unmarshal(c.MustCall("ahpd/webhookLog", map[string]any{"limit": 3}), &log); err != nil {
		t.Fatal(err)
	}
	if len(log.Webhooks) != 1 || log.Webhooks[0].Name != "rx" || !log.Webhooks[0].Signed || len(log.Deliveries) != 3 ||
		log.Deliveries[0].Event != events.AutomationRunFinished {
		t.Errorf("ahpd/webhookLog: %+v", log)
	}
	if strings.Contains(string(c.MustCall("ahpd/webhookLog", nil)), "/hook") {
		t.Error("ahpd/webhookLog shows the URL's path")
	}
}

// TestSessionsNeverWaitOnAReceiver: with a receiver that does not answer,
// a session's turns go on and end as ever; what waits for it is bounded
// (the oldest dropped); once it answers, the rest is delivered in order.
func TestSessionsNeverWaitOnAReceiver(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	rc := newHookReceiver(t, hold)
	hooks := openHooks(t, rc.srv.URL, 2)
	th := startHost(t, "", withEvents(hooks))
	c := th.client("c1")
	session, chat := th.newSession(c, "s1", nil)
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5"} {
		send(t, c, chat, id, "say "+id) // each ends, the receiver hung on the first
	}
	// A change of the session leaves its outbox behind the five events:
	// once it is seen, they were handed over.
	c.Dispatch(session, &protocol.SessionTitleChangedAction{Title: "barrier"})
	c.WaitState(session, "the title", func(s protocol.ChannelState) bool { return s.(*protocol.SessionState).Title == "barrier" })
	if st := hooks.Log(0).Webhooks[0]; st.Pending != 3 || st.Dropped != 2 {
		t.Errorf("with the receiver hung: %d pending, %d dropped; want 3 (one under way) and 2", st.Pending, st.Dropped)
	}
	close(hold)
	var got []string
	for range 3 {
		got = append(got, rc.next(t, events.TurnCompleted).Turn.ID)
	}
	if strings.Join(got, " ") != "t1 t4 t5" {
		t.Errorf("delivered %v, want t1 (under way as it hung), then the newest two", got)
	}
}
