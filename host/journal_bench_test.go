package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// The journal's benchmarks through the host (docs/JOURNAL.md, Figures):
// the streaming throughput and the wait a client sees here, the replay,
// disk, cold start and turn figures in journal_figures_bench_test.go.

// BenchmarkJournalStreaming has 50 sessions stream a long reply each at
// once (the script backend saying 2,000 deltas of three words), every
// session's chat watched by a client of its own on a real WebSocket, with
// and without the journal. The backend is the script backend with the
// time each delta is emitted noted on the side, and each client notes
// when the words of each delta reach it. With load=flood the backend
// emits as fast as the host takes the deltas (the throughput); with
// load=paced each session emits a delta a millisecond, 50,000 actions/s
// in all, the goal; with load=light a delta every 10 ms (300 a
// session, 5,000 actions/s), where the wait is no backlog's but the
// path's own; load=one is that in one session alone.
//
//   - actions/s: the deltas emitted over the time from the turns' start
//     until every client saw its turn end;
//   - journaled/s (with the journal): the journal entries written over
//     that time;
//   - ms/p50-wait, ms/p99-wait, ms/max-wait: from a delta's emit to its
//     frame reaching its client. The difference between the two variants
//     is what clients wait on the journal (the disk and the ack).
//   - cores: the CPU time of the process (host, NATS and the clients)
//     over that time; near the machine's cores, the waits are a queue's;
//     cpu-µs/action: that CPU time over the deltas emitted.
func BenchmarkJournalStreaming(b *testing.B) {
	type load struct {
		name     string
		sessions int
		every    time.Duration // between a session's deltas; 0: as fast as they go
		deltas   int           // per session
	}
	loads := []load{{"flood", 50, 0, 2000}, {"paced", 50, time.Millisecond, 2000},
		{"light", 50, 10 * time.Millisecond, 300}, {"one", 1, 10 * time.Millisecond, 300}}
	for _, tc := range loads {
		for _, journaled := range []bool{false, true} {
			b.Run(fmt.Sprintf("load=%s/journal=%v", tc.name, journaled), func(b *testing.B) {
				benchStreaming(b, tc.sessions, tc.deltas, tc.every, journaled)
			})
		}
	}
}

// benchStreaming runs the turns of BenchmarkJournalStreaming on a host
// of its own and reports their figures.
func benchStreaming(b *testing.B, sessions, deltas int, every time.Duration, journaled bool) {
	st := newStamps(sessions, deltas*3)
	st.every = every
	state := b.TempDir()
	var opts []hostOption
	var j *journal.Journal
	if journaled {
		j = benchJournal(b, state)
		opts = append(opts, withJournal(j))
	}
	opts = append(opts, withStamps(state, st))
	th := startBenchHostIn(b, state, opts...)
	clients := make([]*streamClient, sessions)
	for i := range clients {
		c := &streamClient{benchClient: dialBench(b, th.url), st: st, session: i}
		c.chat = c.newSession(b, fmt.Sprintf("ahp-session:/j%02d", i), th.work)
		clients[i] = c
	}
	var elapsed, cpu time.Duration
	var emitted, written int64
	var waits []int64
	for turn := 0; b.Loop(); turn++ {
		st.reset()
		var before uint64
		if j != nil {
			before = lastSeq(b, j)
		}
		start, cpu0 := time.Now(), processCPU()
		for _, c := range clients {
			c.startTurn(b, c.chat, fmt.Sprintf("t%d", turn), "say "+stampedWords(c.session, deltas*3))
		}
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() { c.stream(b, fmt.Sprintf("t%d", turn)) })
		}
		wg.Wait()
		elapsed += time.Since(start)
		cpu += processCPU() - cpu0
		emitted += st.count.Load()
		if j != nil {
			written += int64(lastSeq(b, j) - before)
		}
		for _, c := range clients {
			waits = append(waits, c.waits...)
			c.waits = c.waits[:0]
		}
	}
	b.ReportMetric(float64(emitted)/elapsed.Seconds(), "actions/s")
	if j != nil {
		b.ReportMetric(float64(written)/elapsed.Seconds(), "journaled/s")
	}
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(emitted), "cpu-µs/action")
	slices.Sort(waits)
	if int64(len(waits)) < emitted*9/10 {
		b.Fatalf("the clients saw %d deltas arrive of %d emitted", len(waits), emitted)
	}
	ms := func(q float64) float64 {
		return float64(waits[min(len(waits)-1, int(q*float64(len(waits))))]) / 1e6
	}
	b.ReportMetric(ms(0.5), "ms/p50-wait")
	b.ReportMetric(ms(0.99), "ms/p99-wait")
	b.ReportMetric(ms(1), "ms/max-wait")
}

// benchJournal opens an embedded journal under state, closed after the
// host started after it.
func benchJournal(b *testing.B, state string) *journal.Journal {
	b.Helper()
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(state, "journal")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := j.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return j
}

func lastSeq(b *testing.B, j *journal.Journal) uint64 {
	b.Helper()
	seq, err := j.LastSeq(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return seq
}

// stamps holds, per session, when the delta ending with each word was
// emitted (Unix nanoseconds, 0 when not yet), and how many were. With
// every set, a session's k-th delta is emitted no sooner than k times
// every after its first.
type stamps struct {
	at    [][]atomic.Int64
	first []atomic.Int64
	count atomic.Int64
	every time.Duration
}

func newStamps(sessions, words int) *stamps {
	st := &stamps{at: make([][]atomic.Int64, sessions), first: make([]atomic.Int64, sessions)}
	for i := range st.at {
		st.at[i] = make([]atomic.Int64, words)
	}
	return st
}

// pace waits for the time a session's delta ending with word is due.
func (st *stamps) pace(session, word int) {
	if st.every == 0 {
		return
	}
	now := time.Now().UnixNano()
	if !st.first[session].CompareAndSwap(0, now) {
		due := st.first[session].Load() + int64(word/3)*int64(st.every)
		if wait := due - now; wait > 0 {
			time.Sleep(time.Duration(wait)) // the load's pace: nothing to wait on
		}
	}
}

func (st *stamps) reset() {
	st.count.Store(0)
	for i := range st.at {
		st.first[i].Store(0)
		for k := range st.at[i] {
			st.at[i][k].Store(0)
		}
	}
}

// stampedWords is a reply of n words naming their session and place:
// s07w000000 s07w000001 ...
func stampedWords(session, n int) string {
	var sb strings.Builder
	for k := range n {
		if k > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "s%02dw%06d", session, k)
	}
	return sb.String()
}

// lastStamp finds the last stamped word in data: its session and place.
func lastStamp(data []byte) (session, word int, ok bool) {
	digits := func(p []byte) bool {
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	for i := len(data) - 7; i >= 3; i-- {
		if data[i] != 'w' || data[i-3] != 's' || !digits(data[i-2:i]) || !digits(data[i+1:i+7]) {
			continue
		}
		session, _ = strconv.Atoi(string(data[i-2 : i]))
		word, _ = strconv.Atoi(string(data[i+1 : i+7]))
		return session, word, true
	}
	return 0, 0, false
}

// withStamps registers the script backend, its text noted in st as it
// is emitted.
func withStamps(state string, st *stamps) hostOption {
	return func(o *host.Options) {
		backends := plugins.NewRegistry()
		if err := backends.Register(stampBackend{script.New(filepath.Join(state, "transcripts", "script")), st}); err != nil {
			panic(err)
		}
		o.Backends = backends
	}
}

type stampBackend struct {
	plugins.Backend
	st *stamps
}

func (s stampBackend) Start(ctx context.Context, opts plugins.StartOptions) (plugins.Agent, error) {
	a, err := s.Backend.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return stampAgent{a, s.st}, nil
}

type stampAgent struct {
	plugins.Agent
	st *stamps
}

func (a stampAgent) Prompt(ctx context.Context, msg protocol.Message, t plugins.Turn) error {
	return a.Agent.Prompt(ctx, msg, stampTurn{t, a.st})
}

type stampTurn struct {
	plugins.Turn
	st *stamps
}

// Text notes the time before the host is handed the text: the wait
// measured includes whatever the host does with it.
func (t stampTurn) Text(s string) {
	if session, word, ok := lastStamp([]byte(s)); ok && session < len(t.st.at) && word < len(t.st.at[session]) {
		t.st.pace(session, word)
		t.st.at[session][word].Store(time.Now().UnixNano())
		t.st.count.Add(1)
	}
	t.Turn.Text(s)
}

// benchClient is a raw connection driving sessions: it reads frames
// without decoding more than it must, so a benchmark measures the host.
type benchClient struct {
	*rawClient
	clientSeq int
}

// dialBench connects and initializes, subscribing to nothing.
func dialBench(b *testing.B, url string) *benchClient {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(256 << 20)
	b.Cleanup(func() { _ = ws.Close(websocket.StatusNormalClosure, "") })
	c := &benchClient{rawClient: &rawClient{ws: ws}}
	c.must(b, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": fmt.Sprintf("bench-%p", c)})
	return c
}

// call makes a call and returns its answer; a failed write or read, or
// an error answer, is an error. It may run on a goroutine of its own.
func (c *benchClient) call(method string, params any) ([]byte, error) {
	c.next++
	id := 1000 + c.next
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	want := []byte(fmt.Sprintf(`"id":%d,`, id))
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if !bytes.Contains(data, want) {
			continue
		}
		var res struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &res); err != nil || res.Error != nil {
			return nil, fmt.Errorf("%s: %v %.300s", method, err, data)
		}
		return data, nil
	}
}

// must makes a call and fails on an error.
func (c *benchClient) must(b *testing.B, method string, params any) []byte {
	b.Helper()
	data, err := c.call(method, params)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// open creates a script session working in dir, subscribes to its chat
// and returns the chat.
func (c *benchClient) open(session, dir string) (string, error) {
	if _, err := c.call("createSession", map[string]any{"channel": session, "provider": "script",
		"workingDirectories": []string{"file://" + dir}, "config": map[string]any{"autoApprove": "allow"}}); err != nil {
		return "", err
	}
	chat := protocol.DefaultChatURI(session)
	_, err := c.call("subscribe", map[string]any{"channel": chat})
	return chat, err
}

// newSession opens a session (open), failing on an error.
func (c *benchClient) newSession(b *testing.B, session, dir string) string {
	b.Helper()
	chat, err := c.open(session, dir)
	if err != nil {
		b.Fatal(err)
	}
	return chat
}

// send sends a chat a message, not waiting.
func (c *benchClient) send(chat, turnID, text string) error {
	c.clientSeq++
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "dispatchAction", "params": map[string]any{
		"channel": chat, "clientSeq": c.clientSeq,
		"action": &protocol.ChatTurnStartedAction{
			TurnID: turnID, StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		},
	}})
	return c.ws.Write(context.Background(), websocket.MessageText, msg)
}

// startTurn sends a chat a message (send), failing on an error.
func (c *benchClient) startTurn(b *testing.B, chat, turnID, text string) {
	b.Helper()
	if err := c.send(chat, turnID, text); err != nil {
		b.Fatal(err)
	}
}

// waitTurn reads frames until the turn ends, failing if it fails.
func (c *benchClient) waitTurn(b *testing.B, turnID string) {
	b.Helper()
	if err := c.readTurn(turnID, nil); err != nil {
		b.Fatal(err)
	}
}

// readTurn reads frames until the turn ends, handing each to seen. It
// may run on a goroutine of its own.
func (c *benchClient) readTurn(turnID string, seen func([]byte)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	end := []byte(`"type":"chat/turnComplete","turnId":"` + turnID + `"`)
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("waiting for turn %s to end: %w", turnID, err)
		}
		if bytes.Contains(data, []byte(`"type":"chat/error"`)) {
			return fmt.Errorf("turn %s: %.300s", turnID, data)
		}
		if seen != nil {
			seen(data)
		}
		if bytes.Contains(data, end) {
			return nil
		}
	}
}

// streamClient watches one session's chat and notes how long each delta
// took from its emit to its frame.
type streamClient struct {
	*benchClient
	st      *stamps
	session int
	chat    string
	waits   []int64 // nanoseconds
}

// stream reads the turn's frames, noting the wait of every delta whose
// words a frame brings (merged frames bring several). It runs on a
// goroutine of its own.
func (c *streamClient) stream(b *testing.B, turnID string) {
	got := -1 // the last word seen
	at := c.st.at[c.session]
	err := c.readTurn(turnID, func(data []byte) {
		// Only a reply's frames: the turn's start repeats the whole message.
		if !bytes.Contains(data, []byte(`"type":"chat/delta"`)) && !bytes.Contains(data, []byte(`"type":"chat/responsePart"`)) {
			return
		}
		session, word, ok := lastStamp(data)
		if !ok || session != c.session || word <= got {
			return
		}
		now := time.Now().UnixNano()
		for k := got + 1; k <= word && k < len(at); k++ {
			if t := at[k].Load(); t != 0 {
				c.waits = append(c.waits, now-t)
			}
		}
		got = word
	})
	if err != nil {
		b.Error(err)
	}
}
