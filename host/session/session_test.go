package session_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/checkpoints"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/fanout"
	"github.com/ahpd/ahpd/host/outbox"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
	"go.uber.org/goleak"
)

// TestMain checks that nothing a session started outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHost is the host as one session sees it, keeping what the session
// asks of it: no registry, no journal, no connections but the test's.
type fakeHost struct {
	bus *fanout.Bus
	wg  sync.WaitGroup

	mu        sync.Mutex
	published []fanout.Item
	records   map[string][]byte // id -> the last record written
	own       []catalogue.Key
	active    []int64
	started   []string // providers whose agents started, with how
	relisted  int
	took      []time.Duration // each turn's run, as told at its end
	first     []time.Duration // each turn's wait for its first output
	ended     chan protocol.TurnState
}

func newFakeHost() *fakeHost {
	return &fakeHost{bus: fanout.New(64, 0), records: map[string][]byte{}, ended: make(chan protocol.TurnState, 4)}
}

// The outboxes' sink.

func (f *fakeHost) Publish(_ string, run []outbox.Effect) int64 {
	f.mu.Lock()
	f.published = slices.AppendSeq(f.published, outbox.Items(run))
	f.mu.Unlock()
	f.bus.PublishAll(outbox.Items(run))
	return 0
}

func (f *fakeHost) Go(fn func()) { f.wg.Go(fn) }

// Journal: this host keeps none (Env.Journaled is false).

func (f *fakeHost) AppendDurably(string, [][]byte) ([]uint64, error) { return nil, nil }
func (f *fakeHost) ReadTurnsAt(context.Context, string, uint64) ([]protocol.Turn, *string, error) {
	return nil, nil, nil
}
func (f *fakeHost) WriteRestartPoint(_ *session.Session, _ []session.RestartSnap, then func(map[*session.ChatEntry]uint64)) {
	then(nil)
}
func (f *fakeHost) WriteResidency(string, string) {}
func (f *fakeHost) JournalFailing() bool          { return false }
func (f *fakeHost) JournalRefusal() string        { return "" }
func (f *fakeHost) WaitBegins()                   {}
func (f *fakeHost) WaitEnds()                     {}

// Records.

func (f *fakeHost) WriteRecord(id string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[id] = slices.Clone(data)
	return nil
}

func (f *fakeHost) QueueRecord(id string, data []byte, told func(error)) {
	err := f.WriteRecord(id, data)
	if told != nil {
		told(err)
	}
}

func (f *fakeHost) FlushRecord(string) {}

func (f *fakeHost) RemoveRecord(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.records, id)
	return nil
}

// Catalogue.

func (f *fakeHost) NoteOwn(keys []catalogue.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.own = append(f.own, keys...)
}
func (f *fakeHost) ForgetOwn([]catalogue.Key) {}
func (f *fakeHost) Shown(catalogue.Key) bool  { return false }
func (f *fakeHost) Relist(*session.Session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relisted++
}

// Git: no remote to push checkpoints to.

func (f *fakeHost) Push(*session.Session, *checkpoints.Repo)                               {}
func (f *fakeHost) PushRemoval(*session.Session, *checkpoints.Repo)                        {}
func (f *fakeHost) FetchMissing(context.Context, *session.Session, *checkpoints.Repo, int) {}

// Notices.

func (f *fakeHost) Poke() {}
func (f *fakeHost) AddActive(delta int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active = append(f.active, delta)
}
func (f *fakeHost) BackendStarted(provider string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		provider += ": " + err.Error()
	}
	f.started = append(f.started, provider)
}
func (f *fakeHost) CountTurnEnd(protocol.Action) {}
func (f *fakeHost) FirstOutput(_ *session.Session, took time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.first = append(f.first, took)
}
func (f *fakeHost) TurnEnded(_ *session.Session, state protocol.TurnState, took time.Duration) {
	f.mu.Lock()
	f.took = append(f.took, took)
	f.mu.Unlock()
	f.ended <- state
}
func (f *fakeHost) Unloaded()    {}
func (f *fakeHost) LetGo(string) {}

// Policy: anyone may work anywhere.

func (f *fakeHost) WorkRefusal(*conn.Conn, *session.Session) string { return "" }
func (f *fakeHost) OwnerOf(by grants.Principal) grants.Principal    { return by }
func (f *fakeHost) MayRead(*conn.Conn, grants.Target) bool          { return true }
func (f *fakeHost) KeepOut([]string, grants.Target)                 {}
func (f *fakeHost) HostRules() *plugins.HostRules                   { return nil }
func (f *fakeHost) AutoReply() bool                                 { return false }
func (f *fakeHost) MCPServers() jsontext.Value                      { return nil }

// TestSessionTurn runs one turn of a session made against a fake host, with
// the script backend, and checks what the session asked of its host: the
// turn's actions published in order on its chat, the active count up and
// down again, its agent started, its conversation noted as the host's own
// and its record written with the turn in it.
func TestSessionTurn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeHost()
	work := t.TempDir()
	env := &session.Env{
		Host: f, Ctx: ctx, Log: slog.New(slog.DiscardHandler), Now: time.Now, Clock: clock.Real{},
		KeepsRecords: true, TurnWindow: 200,
		Bus: f.bus, Trees: worktree.NewManager("", nil), Sink: f,
	}
	su := protocol.SessionURI{Scheme: script.Provider, ID: "s1"}
	s := session.New(env, session.Spec{URI: su, Provider: script.Provider, Backend: script.New(t.TempDir()),
		Dirs: []string{work}, Owner: "user:ann"})

	// The test's connection: nothing reads what it is sent.
	pr, pw := io.Pipe()
	c := conn.New(ctx, conn.Config{ID: 1, Transport: conn.Lines(pr, io.Discard, 1<<20)})
	defer pw.Close()

	chat := protocol.DefaultChatURI(s.URI())
	e := s.ChatOf(chat)
	if e == nil {
		t.Fatalf("a new session has no default chat %s", chat)
	}
	s.DispatchChat(c, e, &protocol.ChatTurnStartedAction{
		TurnID: "t1", StartedAt: protocol.FormatTime(time.Now()),
		Message: protocol.Message{Text: "say hello there", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	}, &protocol.ActionOrigin{ClientID: "c1", ClientSeq: 1})

	if state := <-f.ended; state != protocol.TurnStateComplete {
		t.Fatalf("the turn ended %v, want complete", state)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	s.Hold()
	if err := s.Shutdown(ctx, ctx); err != nil {
		t.Fatal(err)
	}
	f.wg.Wait()

	f.mu.Lock()
	defer f.mu.Unlock()
	var types []string
	var text strings.Builder
	for _, it := range f.published {
		if it.Channel != chat {
			continue
		}
		types = append(types, string(it.Action.Type()))
		if d, ok := it.Action.(*protocol.ChatResponsePartAction); ok {
			if md, ok := d.Part.(*protocol.MarkdownResponsePart); ok {
				text.WriteString(md.Content)
			}
		}
		if d, ok := it.Action.(*protocol.ChatDeltaAction); ok {
			text.WriteString(d.Content)
		}
	}
	first, last := slices.Index(types, string(protocol.ActionChatTurnStarted)), slices.Index(types, string(protocol.ActionChatTurnComplete))
	if first < 0 || last < first {
		t.Fatalf("the chat's actions are %v: want its turn started, then completed", types)
	}
	if !strings.Contains(text.String(), "hello there") {
		t.Errorf("the turn's response says %q, want the script's \"hello there\"", text.String())
	}
	var sum int64
	for _, d := range f.active {
		sum += d
	}
	if !slices.Contains(f.active, 1) || sum != 0 {
		t.Errorf("the active count moved by %v: want up one for the turn and down again", f.active)
	}
	if !slices.Contains(f.started, script.Provider) {
		t.Errorf("agents started: %v, want the script backend's, without error", f.started)
	}
	if !slices.Contains(f.own, catalogue.Key{Provider: script.Provider, ID: "s1"}) {
		t.Errorf("conversations noted as the host's own: %v, want the session's", f.own)
	}
	data, ok := f.records["s1"]
	if !ok {
		t.Fatal("the session's record was never written")
	}
	var rec session.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("the record written does not parse: %v", err)
	}
	if rec.URI != s.URI() || rec.Owner != "user:ann" || len(rec.Chats) != 1 || !rec.Chats[0].Started {
		t.Errorf("the record written is %s: want the session's, owned by ann, its chat started", data)
	}
	if len(f.first) != 1 || f.first[0] < 0 {
		t.Errorf("the waits for a turn's first output were told as %v: want one", f.first)
	}
	if len(f.took) != 1 || f.took[0] < 0 {
		t.Errorf("the turn's run was told as %v: want one, of a known length", f.took)
	}
	if f.relisted == 0 {
		t.Error("the session never told the listing of a new row though its turn modified it")
	}
}
