package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/journal"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// The journal's figures through the host (docs/JOURNAL.md): replaying a
// session, the bytes a turn takes on disk, a cold start with 1,000
// journaled sessions, and what the journal adds to a turn.

// replyWords is the vocabulary of the replies: words drawn from it at
// random compress about as well as an agent's prose, where one word
// repeated would compress far too well.
var replyWords = strings.Fields(`The function reads the configuration once at start and keeps it in memory;
	a change on disk is picked up by the watcher, which validates the new file before swapping it in,
	so a half-written edit never takes effect. Tests cover the three cases: a valid change, an invalid
	one that is logged and ignored, and a removal. Next I will run go test and fix whatever fails in
	handler.go, store.go or main.go.`)

// reply is a script message saying about size bytes of prose, different
// for each seed.
func reply(seed uint64, size int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var sb strings.Builder
	sb.WriteString("say")
	for sb.Len() < size+3 {
		sb.WriteByte(' ')
		sb.WriteString(replyWords[r.IntN(len(replyWords))])
	}
	return sb.String()
}

// runTurns runs turns in a chat one after another, each saying size
// bytes, named from first on.
func runTurns(b *testing.B, c *benchClient, chat string, first, turns, size int) {
	b.Helper()
	for t := first; t < first+turns; t++ {
		id := fmt.Sprintf("t%d", t)
		c.startTurn(b, chat, id, reply(uint64(t), size))
		c.waitTurn(b, id)
	}
}

// BenchmarkSequentialTurns runs turns one after another in one session,
// each sent as soon as the last is seen to end, on two hosts at once: one
// without the journal and one with it, a turn on each in turn, so the
// load of a shared machine weighs on both alike. ms/turn-plain and
// ms/turn-journal are the time from a turn's message to its end reaching
// the client; ms/added their difference, what the journal adds to a
// turn. A short reply is a few actions; a 2 KB one about 110 deltas.
func BenchmarkSequentialTurns(b *testing.B) {
	for _, size := range []int{5, 2000} {
		b.Run(fmt.Sprintf("reply=%dB", size), func(b *testing.B) {
			type side struct {
				c    *benchClient
				chat string
				took time.Duration
			}
			var sides [2]*side
			for i := range sides {
				state := b.TempDir()
				var opts []hostOption
				if i == 1 {
					opts = append(opts, withJournal(benchJournal(b, state)))
				}
				th := startBenchHostIn(b, state, opts...)
				c := dialBench(b, th.url)
				chat := c.newSession(b, "ahp-session:/seq", th.work)
				runTurns(b, c, chat, 0, 3, size) // warm: the agent started, the code paths hot
				sides[i] = &side{c: c, chat: chat}
			}
			turn := 3
			for b.Loop() {
				for _, sd := range sides {
					start := time.Now()
					runTurns(b, sd.c, sd.chat, turn, 1, size)
					sd.took += time.Since(start)
				}
				turn++
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(ms(sides[0].took), "ms/turn-plain")
			b.ReportMetric(ms(sides[1].took), "ms/turn-journal")
			b.ReportMetric(ms(sides[1].took-sides[0].took), "ms/added")
		})
	}
}

// BenchmarkReplaySession asks ahpd/replaySession for the state of a
// session of 100 turns of 2 KB (about 11,000 actions) at its last
// action, which reads and reduces its whole journal: actions/s is its
// journal's entries over the time of an answer.
func BenchmarkReplaySession(b *testing.B) {
	state := b.TempDir()
	j := benchJournal(b, state)
	th := startBenchHostIn(b, state, withJournal(j))
	c := dialBench(b, th.url)
	session := "ahp-session:/replay"
	chat := c.newSession(b, session, th.work)
	runTurns(b, c, chat, 0, 100, 2000)
	entries := 0
	for after := uint64(0); ; {
		page, err := j.Read(context.Background(), session, after, journal.MaxReadLimit)
		if err != nil {
			b.Fatal(err)
		}
		entries += len(page)
		if len(page) < journal.MaxReadLimit {
			break
		}
		after = page[len(page)-1].Seq
	}
	for b.Loop() {
		var res struct {
			Result struct {
				Chats []struct {
					Turns []json.RawMessage `json:"turns"`
				} `json:"chats"`
			} `json:"result"`
		}
		data := c.must(b, "ahpd/replaySession", map[string]any{"channel": session})
		if err := json.Unmarshal(data, &res); err != nil || len(res.Result.Chats) != 1 || len(res.Result.Chats[0].Turns) != 100 {
			b.Fatalf("not the session's 100 turns (%v): %.300s", err, data)
		}
	}
	b.ReportMetric(float64(entries*b.N)/b.Elapsed().Seconds(), "actions/s")
	b.ReportMetric(float64(entries), "entries")
}

// BenchmarkJournalDiskPerTurn runs turns replying 2 KB each in 5
// sessions, in turn, and reports what the journal's store grew by per
// turn (disk-B/turn, once the journal is closed), with the store's
// blocks compressed (the default) and not. The server compresses a
// block only once it is full (about 8 MB of entries, some 200 turns),
// so the compressed figure falls towards its steady state as more
// blocks are: run it with -benchtime 1000x or more. It also reports what
// the entries hold per turn: the deltas (delta-B) and of those their
// text (text-B), the response part that carries the first text
// (part-B), the other actions of the session (action-B: the turn's start
// and end, status), the snapshots (snapshot-B) and root's journal
// (root-B); the store adds about 100 bytes an entry to them (its
// subject, header and checksum) before compression.
func BenchmarkJournalDiskPerTurn(b *testing.B) {
	for _, compressed := range []bool{true, false} {
		b.Run(fmt.Sprintf("compressed=%v", compressed), func(b *testing.B) {
			benchDiskPerTurn(b, journal.Config{Uncompressed: !compressed})
		})
	}
}

func benchDiskPerTurn(b *testing.B, cfg journal.Config) {
	state := b.TempDir()
	cfg.Dir = filepath.Join(state, "journal")
	j, err := journal.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := j.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	base := dirBytes(b, cfg.Dir)
	if j, err = journal.Open(context.Background(), cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close(context.Background()) }) // closed below; this is for a failure
	th := startBenchHostIn(b, state, withJournal(j))
	c := dialBench(b, th.url)
	var sessions, chats []string
	for i := range 5 {
		sessions = append(sessions, fmt.Sprintf("ahp-session:/disk%d", i))
		chats = append(chats, c.newSession(b, sessions[i], th.work))
	}
	turns := 0
	for b.Loop() {
		runTurns(b, c, chats[turns%len(chats)], turns, 1, 2000)
		turns++
	}
	b.StopTimer()
	var sizes entrySizes
	for _, s := range append(sessions, protocol.RootURI) {
		sizes.add(b, j, s)
	}
	c.ws.CloseNow()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := th.h.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if err := j.Close(ctx); err != nil {
		b.Fatal(err)
	}
	per := func(n int64) float64 { return float64(n) / float64(turns) }
	b.ReportMetric(per(dirBytes(b, cfg.Dir)-base), "disk-B/turn")
	b.ReportMetric(per(sizes.entries), "entries/turn")
	b.ReportMetric(per(sizes.delta), "delta-B/turn")
	b.ReportMetric(per(sizes.text), "text-B/turn")
	b.ReportMetric(per(sizes.part), "part-B/turn")
	b.ReportMetric(per(sizes.action), "action-B/turn")
	b.ReportMetric(per(sizes.snapshot), "snapshot-B/turn")
	b.ReportMetric(per(sizes.root), "root-B/turn")
}

// entrySizes adds up a journal's entry bytes by what they hold.
type entrySizes struct {
	entries, delta, text, part, action, snapshot, root int64
}

func (z *entrySizes) add(b *testing.B, j *journal.Journal, session string) {
	b.Helper()
	for after := uint64(0); ; {
		page, err := j.Read(context.Background(), session, after, journal.MaxReadLimit)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range page {
			n := int64(len(e.Data))
			z.entries++
			var probe struct {
				Snapshot json.RawMessage `json:"snapshot"`
				Action   struct {
					Type    string `json:"type"`
					Content string `json:"content"`
				} `json:"action"`
			}
			if err := json.Unmarshal(e.Data, &probe); err != nil {
				b.Fatal(err)
			}
			switch {
			case session == protocol.RootURI:
				z.root += n
			case probe.Snapshot != nil:
				z.snapshot += n
			case probe.Action.Type == string(protocol.ActionChatDelta):
				z.delta += n
				z.text += int64(len(probe.Action.Content))
			case probe.Action.Type == string(protocol.ActionChatResponsePart):
				z.part += n
			default:
				z.action += n
			}
		}
		if len(page) < journal.MaxReadLimit {
			return
		}
		after = page[len(page)-1].Seq
	}
}

// dirBytes is the length of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	b.Helper()
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// BenchmarkColdStart1000Journaled starts a host on a state directory of
// 1,000 stored sessions, each with a journal of three turns of 2 KB
// (about 380,000 entries in all), without the journal and with it, one
// after the other in each round, so the load of a shared machine weighs
// on both alike:
//
//   - ms/journal-open: opening the journal, its embedded server
//     recovering the store;
//   - ms/start-plain, ms/start-journal: that and host.New, until the
//     host serves;
//   - ms/snapshot-plain, ms/snapshot-journal: from the start until a
//     client connected and subscribed to a stored session's chat has its
//     snapshot.
func BenchmarkColdStart1000Journaled(b *testing.B) {
	const sessions, turns = 1000, 3
	state := b.TempDir()
	fillSessions(b, state, sessions, turns)
	session := fmt.Sprintf("ahp-session:/cold%04d", sessions/2)
	var opened time.Duration
	var started, snapshot [3]time.Duration
	for b.Loop() {
		for i, mode := range []string{"plain", "journal", "crashed"} {
			o, s, f := coldStart(b, state, mode, session)
			opened, started[i], snapshot[i] = opened+o, started[i]+s, snapshot[i]+f
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(opened), "ms/journal-open")
	b.ReportMetric(ms(started[0]), "ms/start-plain")
	b.ReportMetric(ms(started[1]), "ms/start-journal")
	b.ReportMetric(ms(snapshot[0]), "ms/snapshot-plain")
	b.ReportMetric(ms(snapshot[1]), "ms/snapshot-journal")
	b.ReportMetric(ms(started[2]), "ms/start-crashed")
	b.ReportMetric(ms(snapshot[2]), "ms/snapshot-crashed")
}

// fillSessions makes sessions script sessions in state, each with turns
// turns of 2 KB, journaled, with a host closed before it returns. Eight
// clients drive them at once, each a session at a time.
func fillSessions(b *testing.B, state string, sessions, turns int) {
	b.Helper()
	j, err := journal.Open(context.Background(), journal.Config{Dir: filepath.Join(state, "journal")})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close(context.Background()) // after the host's, deferred below
	h, srv := newBenchHost(b, state, j)
	defer closeBenchHost(b, h, srv)
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		b.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	next := make(chan int)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		c := dialBench(b, url)
		wg.Go(func() {
			for i := range next {
				if failed.Load() {
					continue // let the rest go by
				}
				if err := fillSession(c, work, i, turns); err != nil {
					b.Error(err)
					failed.Store(true)
				}
			}
		})
	}
	for i := range sessions {
		next <- i
	}
	close(next)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// fillSession makes session i with its turns, and lets its chat go.
func fillSession(c *benchClient, work string, i, turns int) error {
	chat, err := c.open(fmt.Sprintf("ahp-session:/cold%04d", i), work)
	if err != nil {
		return err
	}
	for t := range turns {
		id := fmt.Sprintf("t%d", t)
		if err := c.send(chat, id, reply(uint64(i*turns+t), 2000)); err != nil {
			return err
		}
		if err := c.readTurn(id, nil); err != nil {
			return err
		}
	}
	_, err = c.call("unsubscribe", map[string]any{"channel": chat})
	return err
}

// coldStart starts a host on state, with its journal or not (mode plain,
// journal, or crashed: with it, as if the last host was killed), and times
// it: until the journal is open, until the host serves, and until a
// client subscribed to session's chat has its snapshot. It closes the
// host before it returns.
func coldStart(b *testing.B, state, mode, session string) (opened, started, snapshot time.Duration) {
	b.Helper()
	start := time.Now()
	var j *journal.Journal
	if mode != "plain" {
		var err error
		if j, err = journal.Open(context.Background(), journal.Config{Dir: filepath.Join(state, "journal")}); err != nil {
			b.Fatal(err)
		}
		defer j.Close(context.Background()) // after the host's, deferred below
	}
	if mode == "crashed" {
		// As after kill -9: no clean stop is marked, and the host reads
		// every session's tail.
		if err := j.SetMark(context.Background(), host.CleanKey, []byte(`{}`)); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
	}
	opened = time.Since(start)
	h, srv := newBenchHost(b, state, j)
	started = time.Since(start)
	defer closeBenchHost(b, h, srv)
	c := dialBench(b, "ws"+strings.TrimPrefix(srv.URL, "http"))
	defer c.ws.CloseNow()
	c.must(b, "subscribe", map[string]any{"channel": protocol.DefaultChatURI(session)})
	return opened, started, time.Since(start)
}

// newBenchHost starts a host on state with the script backend and j, if
// not nil, as its journal, serving on a local port.
func newBenchHost(b *testing.B, state string, j *journal.Journal) (*host.Host, *httptest.Server) {
	b.Helper()
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		b.Fatal(err)
	}
	opts := host.Options{StateDir: state, Backends: backends, Logger: slog.New(slog.DiscardHandler), DefaultDirectory: state}
	if j != nil {
		opts.Journal = j
	}
	h, err := host.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	return h, httptest.NewServer(h.Handler(false, ""))
}

func closeBenchHost(b *testing.B, h *host.Host, srv *httptest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		b.Error(err)
	}
	srv.Close()
}
