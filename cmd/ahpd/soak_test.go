package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

var (
	soakFor  = flag.Duration("soak", 0, "run TestSoak's rounds for this long (the default suite runs one)")
	soakFull = flag.Bool("soak-full", false, "TestSoak's rounds in their full shape: 300 connections, 50 sessions (the default suite runs 120 and 20)")
)

// soakBig is how many of a round's sessions are sent a message of 3 MB.
const soakBig = 4

// soakShape is the shape of one soak round.
type soakShape struct {
	sessions  int // sessions streaming a turn each
	readers   int // connections that read and keep nothing
	watchers  int // connections that keep the states of what they watch
	pipelined int // createSession and subscribe pairs one client pipelines
}

// soakShapes are the full round and the default suite's, which loads the
// daemon the same ways with fewer connections and sessions (a leak that
// grows with the connections still shows in a hundred readers). The
// watchers keep the full round's density, about one and a half to a
// chat. Under the race detector much of a round's time is the test's
// clients going through the 3 MB messages byte by byte, which both shapes
// send.
var soakShapes = map[bool]soakShape{
	true:  {sessions: 50, readers: 280, watchers: 15, pipelined: 200},
	false: {sessions: 20, readers: 100, watchers: 6, pipelined: 100},
}

// TestSoak loads a daemon as a busy host is loaded: 120 connections (300
// with -soak-full), 20 sessions streaming (50), a client that never reads,
// one that sends garbage, one that pipelines 100 createSession and
// subscribe pairs (200). After each round every well-behaved client's
// state equals a fresh snapshot, and at the end no goroutine is left over
// and the daemon's memory is back within 10% of where it started.
// go test ./cmd/ahpd -run TestSoak -soak=10m -soak-full runs it longer.
func TestSoak(t *testing.T) {
	// What it measures is its own daemon's, so it runs beside the other
	// tests rather than alone before them: the longest test of its
	// package.
	t.Parallel()
	// Where transparent huge pages are "always", khugepaged fills the
	// pages ahpd gave back into huge pages again: resident memory the
	// kernel added, not ahpd. The runtime's switch keeps its heap out of
	// them, so what is measured is what ahpd holds.
	godebug := "disablethp=1"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	e := newEnv(t)
	e.extraEnv = []string{"GODEBUG=" + godebug}
	config := writeConfig(t, e, `
sessions: memory
clientWindow: 1s
limits:
  queuedBytes: 2097152
  attachedSessions: 200 # the pipeliner subscribes to each session it makes
`)
	p := launchBin(t, e, plainBin(t), 0, "--listen", "127.0.0.1:0", "--state-dir", e.state, "--config", config, "--log-level", "warn")
	p.awaitListening()
	token := e.token(t)
	m := &scraper{t: t, url: "http://" + p.addr + "/metrics?tkn=" + token}

	// A first round pages in what any round needs; the start is after it.
	soakRound(t, p, token, m, 0)
	m.settle()
	startHeap, startRSS := quietMemory(t, m)
	first := m.get()
	startGoroutines := first["go_goroutines"]
	t.Logf("start: %.1f MB anonymous RSS, %.1f MB live heap (%s), %.0f goroutines", startRSS, startHeap, runtimeMemory(first), startGoroutines)

	deadline := time.Now().Add(*soakFor)
	for round := 1; round == 1 || time.Now().Before(deadline); round++ {
		soakRound(t, p, token, m, round)
		if t.Failed() {
			return
		}
	}
	m.settle()
	endHeap, endRSS := quietMemory(t, m)
	end := m.get()
	t.Logf("end: %.1f MB anonymous RSS, %.1f MB live heap (%s), %.0f goroutines; cut: %.0f slow, %.0f violations", endRSS, endHeap,
		runtimeMemory(end), end["go_goroutines"],
		end[`ahpd_connections_cut_total{reason="slow"}`], end[`ahpd_connections_cut_total{reason="violation"}`])
	// A leak grows with the connections, hundreds a round; the scraper's
	// own keep-alive connection may come or go. On a loaded machine the
	// last connections' goroutines may still be ending after settle saw
	// their count stop falling for a moment: they are waited for.
	m.waitFor("go_goroutines", startGoroutines+2)
	// The live heap is what ahpd holds, and must come back within 10%;
	// its resident memory also has the runtime's own (stacks, spans it
	// keeps), which moves by a MB or two between runs of a small daemon.
	if startRSS == 0 || startHeap == 0 {
		t.Fatal("the daemon did not say what memory it held when quiet")
	}
	// One round (the default suite, on a machine the other packages'
	// tests load) sometimes ends with 1 MB of live heap more than it
	// started with, and resident memory more: what was still on its way
	// out when the daemon fell quiet, and where the runtime's spans
	// landed. Beside a CPU hog (CI's check) one round has ended 8 MB
	// higher (12.1 -> 20.1 MB) with the live heap the same to the tenth
	// of a MB, and the runtime then holding 8.2 MB of heap it had freed
	// but not yet given back. Neither grows with the rounds (50 s of
	// rounds: 2.3 MB live heap before and after), so a long run is held
	// to 10%, and one round's resident memory only to what a leak of a
	// round's connections (hundreds) would exceed.
	heapSlack, rssSlack := 0.25, 2.0
	if *soakFor == 0 {
		heapSlack, rssSlack = 1.5, 12
	}
	if endHeap > max(startHeap*1.1, startHeap+heapSlack) {
		t.Errorf("live heap %.1f MB after the rounds, %.1f MB before", endHeap, startHeap)
	}
	if endRSS > max(startRSS*1.1, startRSS+rssSlack) {
		t.Errorf("RSS %.1f MB after the rounds, %.1f MB before", endRSS, startRSS)
	}
	if end["ahpd_connections"] != 0 || end["ahpd_sessions"] != 0 {
		t.Errorf("%v connections and %v sessions left", end["ahpd_connections"], end["ahpd_sessions"])
	}
}

// runtimeMemory says where the runtime's memory is.
func runtimeMemory(m map[string]float64) string {
	mb := func(k string) float64 { return m["go_memstats_"+k+"_bytes"] / 1e6 }
	return fmt.Sprintf("heap in use %.1f MB, idle %.1f released %.1f, stacks %.1f, spans %.1f, gc %.1f, other %.1f, of the system %.1f, %.0f threads",
		mb("heap_inuse"), mb("heap_idle"), mb("heap_released"), mb("stack_inuse"), mb("mspan_inuse"), mb("gc_sys"), mb("other_sys"), mb("sys"), m["go_threads"])
}

// soakRound runs one round and takes away everything it made.
func soakRound(t *testing.T, p *proc, token string, m *scraper, round int) {
	shape := soakShapes[*soakFull]
	url := p.url(token)
	driver := hosttest.Dial(t, url).Light()
	driver.Initialize(fmt.Sprintf("driver-%d", round), protocol.RootURI)
	chats := make([]string, shape.sessions)
	for i := range chats {
		s := fmt.Sprintf("ahp-session:/soak-%d-%d", round, i)
		driver.MustCall("createSession", map[string]any{"channel": s, "provider": "script"})
		chats[i] = protocol.DefaultChatURI(s)
		driver.Subscribe(chats[i])
		// A first turn announces the session to every client.
		startTurn(driver, chats[i], "t0", "say ready")
	}
	for _, chat := range chats {
		waitTurns(driver, chat, 1)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	// The readers and watchers, connected before the turns start.
	readers := make([]*websocket.Conn, shape.readers)
	for i := range readers {
		// Not the chats of the 3 MB messages (below): what a reader
		// does with them the watchers and the driver do too, and under
		// the race detector a copy of 3 MB is costly.
		readers[i] = dialReader(t, url, fmt.Sprintf("reader-%d-%d", round, i), chats[soakBig+i%(shape.sessions-soakBig)])
		wg.Go(func() { drainFrames(readers[i]) })
	}
	watchers := make([]*hosttest.Client, shape.watchers)
	for i := range watchers {
		watchers[i] = hosttest.Dial(t, url).Light()
		watchers[i].Initialize(fmt.Sprintf("watcher-%d-%d", round, i), protocol.RootURI)
		for j := range 5 {
			watchers[i].Subscribe(chats[(i*5+j)%shape.sessions])
		}
	}
	// The one that never reads watches every chat: it falls behind and
	// is cut (the limit is 2 MB), and nobody else slows down.
	stuck := dialReaderWith(t, url, tinyBuffers, fmt.Sprintf("stuck-%d", round), chats...)
	wg.Go(func() { garbage(t, url, stop) })

	// The turns, and the pipeliner at the same time.
	say := "say " + strings.Repeat("the quick brown fox jumps over the lazy dog ", 200)
	for i, chat := range chats {
		text := say + strconv.Itoa(i)
		if i < soakBig {
			// Messages of 3 MB (spaces, which the script skips): more
			// than the client that never reads may have queued, once the
			// kernel's buffers are full. The one at the head of a queue
			// does not count: a client that keeps up is not cut for it.
			text += "\n" + strings.Repeat(" ", 3<<20)
		}
		startTurn(driver, chat, "t1", text)
	}
	pipeline(t, url, round, shape.pipelined)
	for _, chat := range chats {
		waitTurns(driver, chat, 2)
	}
	close(stop)

	// Every well-behaved client's state is a fresh snapshot's.
	fresh := hosttest.Dial(t, url).Light()
	fresh.Initialize(fmt.Sprintf("fresh-%d", round))
	for _, chat := range chats {
		want := fresh.Subscribe(chat).State
		for _, c := range append([]*hosttest.Client{driver}, watchers...) {
			if c.State(chat) == nil {
				continue
			}
			// Compared as the wire has them: a reducer's state may hold
			// buffers of its own.
			b, _ := json.Marshal(want)
			var a []byte
			c.WaitOrNot("the state of "+chat, func([]hosttest.Message) bool {
				a, _ = json.Marshal(c.State(chat))
				return bytes.Equal(a, b)
			})
			if !bytes.Equal(a, b) {
				i := 0
				for i < len(a) && i < len(b) && a[i] == b[i] {
					i++
				}
				from := max(i-200, 0)
				t.Fatalf("a client's %s is not the snapshot's, from byte %d:\nclient: %.400s\nsnapshot: %.400s", chat, i, a[from:], b[from:])
			}
		}
	}

	// Take everything away.
	for _, s := range sessionsOf(chats) {
		driver.MustCall("disposeSession", map[string]any{"channel": s})
	}
	m.waitAtLeast(`ahpd_connections_cut_total{reason="slow"}`, float64(round+1))
	_ = stuck.CloseNow()
	for _, r := range readers {
		_ = r.Close(websocket.StatusNormalClosure, "")
	}
	wg.Wait()
	for _, c := range append(watchers, fresh, driver) {
		c.Close()
	}
	m.waitFor("ahpd_connections", 0)
}

// waitTurns waits for a chat to have n turns and none running.
func waitTurns(c *hosttest.Client, chat string, n int) {
	c.WaitState(chat, fmt.Sprintf("%d turns", n), func(s protocol.ChannelState) bool {
		cs := s.(*protocol.ChatState)
		return cs.ActiveTurn == nil && len(cs.Turns) == n
	})
}

func sessionsOf(chats []string) []string {
	out := make([]string, len(chats))
	for i, c := range chats {
		u, _ := protocol.ParseChatURI(c)
		out[i] = u.Session
	}
	return out
}

// dialReader connects, initializes and subscribes to channels, on a
// connection the caller reads from, or not.
func dialReader(t *testing.T, url, clientID string, channels ...string) *websocket.Conn {
	t.Helper()
	return dialReaderWith(t, url, nil, clientID, channels...)
}

// tinyBuffers dials with a socket receive buffer of 4 KB, so that a client
// that does not read is behind at once rather than once the kernel's
// buffers are full.
var tinyBuffers = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
	DialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}).DialContext,
}}}

func dialReaderWith(t *testing.T, url string, opts *websocket.DialOptions, clientID string, channels ...string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	send := func(id int, method string, params any) {
		data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
	}
	send(0, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{protocol.ProtocolVersion}, "clientId": clientID, "initialSubscriptions": []string{protocol.RootURI}})
	for i, ch := range channels {
		send(i+1, "subscribe", map[string]any{"channel": ch})
	}
	return ws
}

// drainFrames reads until the connection ends.
func drainFrames(ws *websocket.Conn) {
	for {
		if _, _, err := ws.Read(context.Background()); err != nil {
			return
		}
	}
}

// garbage sends what no client should until stop, reconnecting when cut:
// frames that are not JSON, binary frames, requests malformed each its
// own way.
func garbage(t *testing.T, url string, stop <-chan struct{}) {
	frames := []string{
		"{not json", `[]`, `[1,2]`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":"` + strings.Repeat("x", 4096) + `"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"dispatchAction","params":{"channel":"ahp-chat://nowhere","clientSeq":1,"action":{"type":"chat/turnStarted"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", 1000) + `"}`, `{"jsonrpc":"2.0","id":5,"method":"ping","extra":1}`,
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
		ws, _, err := websocket.Dial(ctx, url, nil)
		cancel()
		if err != nil {
			t.Errorf("the garbage client could not connect: %v", err)
			return
		}
		go drainFrames(ws)
		for _, f := range frames {
			if ws.Write(context.Background(), websocket.MessageText, []byte(f)) != nil {
				break
			}
		}
		_ = ws.Write(context.Background(), websocket.MessageBinary, []byte{0xff, 0x00}) // cut for this
		_ = ws.CloseNow()
	}
}

// pipeline makes n sessions without waiting on an answer before the next
// request, and disposes of them.
func pipeline(t *testing.T, url string, round, n int) {
	c := hosttest.Dial(t, url).Light()
	defer c.Close()
	c.Initialize(fmt.Sprintf("pipeliner-%d", round))
	var pending []*hosttest.Pending
	var made []string
	for i := range n {
		s := fmt.Sprintf("ahp-session:/piped-%d-%d", round, i)
		made = append(made, s)
		pending = append(pending,
			c.Start("createSession", map[string]any{"channel": s, "provider": "script"}),
			c.Start("subscribe", map[string]any{"channel": s}))
	}
	for i, p := range pending {
		if _, err := p.Await(); err != nil {
			t.Fatalf("pipelined request %d: %v", i, err)
		}
	}
	// They are the pipeliner's own until a turn announces them: it
	// disposes of them, pipelined too.
	pending = pending[:0]
	for _, s := range made {
		pending = append(pending, c.Start("disposeSession", map[string]any{"channel": s}))
	}
	for i, p := range pending {
		if _, err := p.Await(); err != nil {
			t.Fatalf("pipelined dispose %d: %v", i, err)
		}
	}
}

// scraper reads the daemon's metrics.
type scraper struct {
	t   *testing.T
	url string
}

var promLine = regexp.MustCompile(`^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$`)

func (s *scraper) get() map[string]float64 {
	s.t.Helper()
	resp, err := http.Get(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := promLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out
}

// waitFor waits for a metric to fall to want.
func (s *scraper) waitFor(name string, want float64) {
	s.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for s.get()[name] > want {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s stayed at %v, above %v", name, s.get()[name], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAtLeast waits for a counter to reach want.
func (s *scraper) waitAtLeast(name string, want float64) {
	s.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for s.get()[name] < want {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s stayed at %v, under %v", name, s.get()[name], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle waits for the daemon to have no connection but the scraper's
// and for its goroutine count to stop falling.
func (s *scraper) settle() {
	s.waitFor("ahpd_connections", 0)
	last := s.get()["go_goroutines"]
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		n := s.get()["go_goroutines"]
		if n >= last {
			return
		}
		last = n
	}
}

// quietMemory waits for the daemon to give back the memory the round
// left, which it does once quiet for two seconds after the last connection
// ended, and returns its live heap and its resident anonymous memory as it
// measured them then, in MB: what it holds, without the garbage of what
// ran since (the scrapes themselves among it), or the pages of its binary
// the round's code paths read in.
func quietMemory(t *testing.T, m *scraper) (heap, rss float64) {
	t.Helper()
	m.waitAtLeast("ahpd_memory_released_after_connections", m.get()["ahpd_connections_closed_total"])
	now := m.get()
	return now["ahpd_memory_live_heap_bytes"] / 1e6, now["ahpd_memory_resident_bytes"] / 1e6
}

// plainBin builds ahpd without the race detector, once, for the tests
// that measure its memory: the detector's own memory is not ahpd's.
func plainBin(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		if !raceEnabled {
			plainPath = ahpdBin
			return
		}
		plainPath = filepath.Join(filepath.Dir(ahpdBin), "ahpd-plain")
		goTool, err := exec.LookPath("go")
		if err != nil {
			plainErr = err
			return
		}
		if out, err := exec.Command(goTool, "build", "-o", plainPath, ".").CombinedOutput(); err != nil {
			plainErr = fmt.Errorf("building ahpd without -race: %v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	if _, err := os.Stat(plainPath); err != nil {
		t.Fatal(err)
	}
	return plainPath
}

var (
	plainOnce sync.Once
	plainPath string
	plainErr  error
)
