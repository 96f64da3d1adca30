//go:build linux

package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// Benchmarks of the catalogue as a client meets it: a real host reading a
// generated corpus of Claude Code transcripts, answered over a real
// WebSocket. The figures, for 10,000 transcripts in 200 project
// folders (2 KB to 50 MB each):
//
//   - cold scan at daemon start under 1.5 s, peak RSS growth under 100 MB
//     (BenchmarkDaemonColdScan);
//   - listSessions' first page of 500 under 10 ms once scanned
//     (BenchmarkListSessionsExternal);
//   - an append to one transcript visible within 200 ms, with work
//     proportional to the appended bytes (BenchmarkExternalAppendVisible).
//
// They run only on demand, as every benchmark does:
//
//	go test ./host -run XXX -bench 'ListSessionsExternal|ExternalAppendVisible|DaemonColdScan' -benchtime 3x
//
// The corpus is catalogue/bench_test.go's: the same spec, cached in the
// same place (os.TempDir()/ahpd-corpus-6), so whichever benchmark runs
// first writes it (about 3.5 GB, some seconds) and the others reuse it.

// The corpus, as catalogue/bench_test.go makes it. Keep these in step
// with that file: a different spec must come with a new version.
const (
	cbCorpusVersion = "6"
	cbCorpusFiles   = 10000
	cbCorpusFolders = 200
)

// cbCorpusNow is the corpus's newest time: its transcripts' lines are
// dated from 60 days before it up to it (each line a second after the
// one before, so a large transcript's last line is a minute or two
// later). Row times come from those lines; each file's mtime is its
// last line's, as the CLI leaves it.
var cbCorpusNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func cbSpec() corpus.Spec {
	return corpus.Spec{Files: cbCorpusFiles, Folders: cbCorpusFolders, Seed: 1, Now: cbCorpusNow}
}

// cbCorpus returns the projects folder of the benchmark corpus, writing
// it first if no complete copy is cached.
func cbCorpus(b *testing.B) (projects string, size int64) {
	b.Helper()
	start := time.Now()
	projects, size, wrote, err := corpus.Cached(filepath.Join(os.TempDir(), "ahpd-corpus-"+cbCorpusVersion), cbSpec())
	if err != nil {
		b.Fatal(err)
	}
	if wrote {
		b.Logf("wrote the corpus (%.2f GB) in %v", float64(size)/1e9, time.Since(start))
	}
	return projects, size
}

// cbClock is the hosts' clock: the corpus's newest time plus an hour,
// running on from there.
//
// The corpus was written for 2026-06-01 and spans the 60 days before; at
// the real date its rows may be months old, and showExternalSessions's
// widest mode, last30Days, would show none of them. No mode shows every
// row. Moving the host's
// clock (Options.Clock, which is what the mode's window is measured from)
// rather than rewriting the transcripts' timestamps or mtimes keeps the
// cached corpus as written. last30Days then shows the rows of the
// corpus's last 30 days, about half of it (some 5,000 rows): the listing
// merges and sorts those and serves the newest 500.
func cbClock() clock.Clock {
	return shiftedClock{base: cbCorpusNow.Add(time.Hour), start: time.Now()}
}

// shiftedClock is the wall clock moved to read base at start.
type shiftedClock struct{ base, start time.Time }

func (c shiftedClock) Now() time.Time { return c.base.Add(time.Since(c.start)) }

func (c shiftedClock) At(t time.Time) (<-chan time.Time, func()) {
	return clock.Real{}.At(time.Now().Add(t.Sub(c.Now())))
}

// cbHost is a host serving the corpus over httptest's WebSocket.
type cbHost struct {
	h    *host.Host
	srv  *httptest.Server
	url  string
	once sync.Once
}

// cbStartHost starts a host with the script backend, as
// startBenchHostIn does, that reads the Claude transcripts under
// projects. Its stop is the caller's to call.
func cbStartHost(b *testing.B, state, projects string, now clock.Clock) *cbHost {
	b.Helper()
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		b.Fatal(err)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		b.Fatal(err)
	}
	h, err := host.New(host.Options{
		StateDir: state, Backends: backends, Logger: slog.New(slog.DiscardHandler), DefaultDirectory: work,
		// The claude backend lists the CLI's projects folder, which
		// the corpus is, under the config folder its environment names.
		Transcripts: host.Transcripts{Listers: []plugins.TranscriptLister{
			claude.New(claude.Options{Env: []string{"CLAUDE_CONFIG_DIR=" + filepath.Dir(projects)}}),
		}},
		Clock: now,
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(false, ""))
	return &cbHost{h: h, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

// awaitScan waits until the catalogue's first scan is published whole:
// its first page comes first, the rest after.
func (th *cbHost) awaitScan(b *testing.B) {
	b.Helper()
	start := time.Now()
	if !th.h.AwaitCatalogue(context.Background()) {
		b.Fatal("the host has no catalogue")
	}
	if d := time.Since(start); d >= 10*time.Second {
		b.Fatalf("the catalogue's first scan did not end in %v", d)
	}
}

func (th *cbHost) stop() {
	th.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = th.h.Close(ctx)
		th.srv.Close()
	})
}

// cbClient is a WebSocket client whose reader goroutine queues every
// frame as it comes, undecoded, so a notification's arrival is timed when
// it arrives and the host never waits on the client.
type cbClient struct {
	ws   *websocket.Conn
	wake chan struct{}
	done chan struct{}
	next int

	mu     sync.Mutex
	frames [][]byte
	err    error
	added  int // root/sessionAdded notifications received
}

var cbAddedMethod = []byte(`"method":"root/sessionAdded"`)

// cbDial connects, initializes and subscribes to the root channel.
func cbDial(b *testing.B, url string) *cbClient {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	c := &cbClient{ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.read()
	c.roundTrip(b, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": "catalogue-bench"})
	c.roundTrip(b, "subscribe", map[string]any{"channel": protocol.RootURI})
	return c
}

func (c *cbClient) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		c.mu.Lock()
		if err != nil {
			c.err = err
		} else {
			if bytes.Contains(data, cbAddedMethod) {
				c.added++
			}
			c.frames = append(c.frames, data)
		}
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

func (c *cbClient) close() {
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.ws.CloseNow()
		<-c.done
	}
}

// frame returns the next frame received, waiting for it until timeout.
func (c *cbClient) frame(b *testing.B, timeout time.Duration) []byte {
	b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.frames) > 0 {
			f := c.frames[0]
			c.frames[0] = nil
			c.frames = c.frames[1:]
			c.mu.Unlock()
			return f
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			b.Fatalf("the connection ended: %v", err)
		}
		select {
		case <-c.wake:
		case <-deadline.C:
			b.Fatalf("nothing received in %v", timeout)
		}
	}
}

// roundTrip sends a request and returns its response frame, undecoded;
// the frames before it are dropped (sessionAdded ones are counted).
func (c *cbClient) roundTrip(b *testing.B, method string, params any) []byte {
	b.Helper()
	c.next++
	id := 100000 + c.next
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	want := []byte(fmt.Sprintf(`"id":%d,`, id))
	for {
		f := c.frame(b, 60*time.Second)
		if bytes.Contains(f, want) {
			if bytes.Contains(f, []byte(`"error":{`)) {
				b.Fatalf("%s failed: %s", method, f)
			}
			return f
		}
	}
}

func (c *cbClient) addedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.added
}

// list answers one page, decoded.
func (c *cbClient) list(b *testing.B, limit int, cursor *string) protocol.ListSessionsResult {
	b.Helper()
	p := map[string]any{"channel": protocol.RootURI, "limit": limit}
	if cursor != nil {
		p["cursor"] = *cursor
	}
	var r struct {
		Result protocol.ListSessionsResult `json:"result"`
	}
	if err := json.Unmarshal(c.roundTrip(b, "listSessions", p), &r); err != nil {
		b.Fatal(err)
	}
	return r.Result
}

// listAll pages through the whole listing and returns its resources.
func (c *cbClient) listAll(b *testing.B) []string {
	b.Helper()
	var all []string
	var cursor *string
	for {
		page := c.list(b, 500, cursor)
		for _, s := range page.Items {
			all = append(all, s.Resource)
		}
		if page.NextCursor == nil {
			return all
		}
		cursor = page.NextCursor
	}
}

// setMode sets showExternalSessions with root/configChanged, sent as a
// request so its answer says it was taken in.
func (c *cbClient) setMode(b *testing.B, mode string) {
	b.Helper()
	c.roundTrip(b, "dispatchAction", map[string]any{
		"channel": protocol.RootURI, "clientSeq": 1,
		"action": map[string]any{"type": "root/configChanged", "config": map[string]any{"showExternalSessions": mode}},
	})
}

var cbEmptyPage = []byte(`"items":[]`)

// waitScanned polls listSessions until it lists rows: the catalogue's
// first page, which it publishes before the rest (see awaitScan).
func (c *cbClient) waitScanned(b *testing.B, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	p := map[string]any{"channel": protocol.RootURI, "limit": 1}
	for {
		if f := c.roundTrip(b, "listSessions", p); !bytes.Contains(f, cbEmptyPage) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nothing listed after %v", timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitAdded waits until the client has been told of n sessions: the
// host announces the rows a scan makes visible after listing shows them,
// and a benchmark should not time its listings against that flood.
func (c *cbClient) waitAdded(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c.addedCount() < n {
		if time.Now().After(deadline) {
			b.Fatalf("told of %d sessions, want %d", c.addedCount(), n)
		}
		c.roundTrip(b, "ping", map[string]any{})
	}
}

// BenchmarkListSessionsExternal answers listSessions' first page of 500
// over a real WebSocket, from a host whose catalogue has scanned the
// corpus and shows the last 30 days of it. ms/page is the round trip,
// rows-listed the rows the whole listing pages through.
func BenchmarkListSessionsExternal(b *testing.B) {
	projects, _ := cbCorpus(b)
	th := cbStartHost(b, b.TempDir(), projects, cbClock())
	b.Cleanup(th.stop)
	c := cbDial(b, th.url)
	b.Cleanup(c.close)
	start := time.Now()
	c.setMode(b, "last30Days")
	c.waitScanned(b, 2*time.Minute)
	th.awaitScan(b)
	scanned := time.Since(start)

	all := c.listAll(b)
	c.waitAdded(b, len(all))
	b.Logf("scanned in %v; %d rows listed", scanned, len(all))

	// One decoded and checked answer; the timed ones are only read, so
	// the figure is the host's.
	params := map[string]any{"channel": protocol.RootURI, "limit": 500}
	var r struct {
		Result protocol.ListSessionsResult `json:"result"`
	}
	raw := c.roundTrip(b, "listSessions", params)
	if err := json.Unmarshal(raw, &r); err != nil {
		b.Fatal(err)
	}
	if want := min(500, len(all)); len(r.Result.Items) != want || want == 0 {
		b.Fatalf("%d rows on the first page, want %d", len(r.Result.Items), want)
	}
	for i, s := range r.Result.Items {
		if s.Resource != all[i] || string(s.Meta["vscode.external"]) != "true" {
			b.Fatalf("row %d: %s, external %s; want %s", i, s.Resource, s.Meta["vscode.external"], all[i])
		}
	}

	for b.Loop() {
		c.roundTrip(b, "listSessions", params)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/page")
	b.ReportMetric(float64(len(r.Result.Items)), "rows/page")
	b.ReportMetric(float64(len(all)), "rows-listed")
	b.ReportMetric(float64(len(raw))/1e3, "kB/page")
}

// BenchmarkListSessionsMerged is BenchmarkListSessionsExternal with
// 10,000 of the host's own sessions besides the corpus, modified across
// the same 30 days, so the first page of 500 interleaves both halves.
// ms/page is the round trip; own-rows/page how many of its rows are the
// host's own.
func BenchmarkListSessionsMerged(b *testing.B) {
	const own = 10000
	projects, _ := cbCorpus(b)
	state := b.TempDir()
	window := 30 * 24 * time.Hour
	storeSessionsAt(b, state, filepath.Join(state, "work"), own, cbCorpusNow.Add(-window), window/own)
	th := cbStartHost(b, state, projects, cbClock())
	b.Cleanup(th.stop)
	c := cbDial(b, th.url)
	b.Cleanup(c.close)
	c.setMode(b, "last30Days")
	c.waitExternal(b, 2*time.Minute)
	th.awaitScan(b)
	all := c.listAll(b)
	if len(all) <= own {
		b.Fatalf("%d rows listed, want more than the %d own sessions", len(all), own)
	}
	c.waitAdded(b, len(all)-own)
	b.Logf("%d rows listed", len(all))

	params := map[string]any{"channel": protocol.RootURI, "limit": 500}
	var r struct {
		Result protocol.ListSessionsResult `json:"result"`
	}
	if err := json.Unmarshal(c.roundTrip(b, "listSessions", params), &r); err != nil {
		b.Fatal(err)
	}
	mine := 0
	for i, s := range r.Result.Items {
		if s.Resource != all[i] {
			b.Fatalf("row %d: %s, want %s", i, s.Resource, all[i])
		}
		if s.Meta["vscode.external"] == nil {
			mine++
		}
	}
	if len(r.Result.Items) != 500 || mine == 0 || mine == 500 {
		b.Fatalf("%d rows on the first page, %d of them own: want 500 of both kinds", len(r.Result.Items), mine)
	}
	for b.Loop() {
		c.roundTrip(b, "listSessions", params)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/page")
	b.ReportMetric(float64(mine), "own-rows/page")
	b.ReportMetric(float64(len(all)), "rows-listed")
}

// waitExternal polls listSessions until an external row is listed: the
// catalogue publishes its first scan whole.
func (c *cbClient) waitExternal(b *testing.B, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	p := map[string]any{"channel": protocol.RootURI, "limit": 500}
	for !bytes.Contains(c.roundTrip(b, "listSessions", p), []byte(`"vscode.external":true`)) {
		if time.Now().After(deadline) {
			b.Fatalf("nothing external listed after %v", timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// cbTarget is a transcript the append benchmark writes to.
type cbTarget struct {
	s    *corpus.Session
	path string
	size int64 // as written; restored after
	n    int   // lines appended
	lats []time.Duration
}

// cbUserLine is a person's prompt as the CLI writes it, members in the
// CLI's order, like the corpus's lines.
func cbUserLine(t *cbTarget, prompt string, at time.Time) string {
	t.n++
	return fmt.Sprintf(`{"parentUuid":"%08x-0000-4000-8000-%012x","isSidechain":false,"userType":"external","cwd":%q,"sessionId":%q,"version":%q,"gitBranch":%q,"type":"user","message":{"role":"user","content":%q},"uuid":"%08x-0000-4000-9000-%012x","timestamp":%q}`+"\n",
		t.n, t.n, t.s.Cwd, t.s.ID, corpus.Version, t.s.Branch, prompt, t.n, t.n, protocol.FormatTime(at))
}

// BenchmarkExternalAppendVisible appends one prompt line to a transcript
// the listing shows and times until the client is told its new
// modifiedAt (root/sessionSummaryChanged, sent after listSessions shows
// it, which each round then checks). ms/append-visible is for the
// largest transcript shown (tens of MB: were the append to make the file
// be read again, it would show); ms/append-visible-small for a small
// one. The catalogue gathers changes for 50 ms (its debounce) before it
// publishes them, so that is the floor. The transcripts are cut back to
// their size after, so the cached corpus stays as written.
func BenchmarkExternalAppendVisible(b *testing.B) {
	projects, _ := cbCorpus(b)
	plan := corpus.Plan(cbSpec())
	th := cbStartHost(b, b.TempDir(), projects, cbClock())
	var targets []*cbTarget
	b.Cleanup(func() {
		th.stop() // first, so the catalogue does not read the cuts
		for _, t := range targets {
			if err := os.Truncate(t.path, t.size); err != nil {
				b.Error(err)
			}
		}
	})
	c := cbDial(b, th.url)
	b.Cleanup(c.close)
	c.setMode(b, "last30Days")
	c.waitScanned(b, 2*time.Minute)
	th.awaitScan(b)
	all := c.listAll(b)
	c.waitAdded(b, len(all))

	// The largest and a small transcript among those shown.
	shown := make(map[string]bool, len(all))
	for _, uri := range all {
		shown[uri] = true
	}
	var big, small *corpus.Session
	for i := range plan {
		s := &plan[i]
		if !shown[protocol.ProviderSessionURI("claude", s.ID).String()] {
			continue
		}
		if big == nil || s.PadTo > big.PadTo {
			big = s
		}
		if s.PadTo < 8<<10 && small == nil {
			small = s
		}
	}
	if big == nil || small == nil {
		b.Fatalf("no transcripts to append to among the %d listed", len(all))
	}
	for _, s := range []*corpus.Session{big, small} {
		path := corpus.Path(projects, s)
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		targets = append(targets, &cbTarget{s: s, path: path, size: fi.Size()})
	}
	b.Logf("appending to %s (%.1f MB) and %s (%.1f kB)", targets[0].s.ID, float64(targets[0].size)/1e6, targets[1].s.ID, float64(targets[1].size)/1e3)

	// The lines are dated by the real clock, as the CLI dates them, not
	// by the host's (see cbClock): dated now, the appended row is the
	// newest of all, at the top of the first page.
	var last time.Time
	appendVisible := func(t *cbTarget) {
		at := time.Now().UTC().Truncate(time.Millisecond)
		if !at.After(last) {
			at = last.Add(time.Millisecond)
		}
		last = at
		uri := protocol.ProviderSessionURI("claude", t.s.ID).String()
		modified := protocol.FormatTime(at)
		line := cbUserLine(t, "One more thing: run the benchmarks again", at)
		wantURI, wantTime := []byte(`"`+uri+`"`), []byte(`"modifiedAt":"`+modified+`"`)

		f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := f.WriteString(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		for {
			fr := c.frame(b, 10*time.Second)
			if bytes.Contains(fr, []byte(`"method":"root/sessionSummaryChanged"`)) &&
				bytes.Contains(fr, wantURI) && bytes.Contains(fr, wantTime) {
				break
			}
		}
		t.lats = append(t.lats, time.Since(start))

		// Listed too: newest of all, at the top of the first page.
		page := c.list(b, 1, nil)
		if len(page.Items) != 1 || page.Items[0].Resource != uri || page.Items[0].ModifiedAt != modified {
			b.Fatalf("after the append the first row is %+v, want %s at %s", page.Items, uri, modified)
		}
	}
	for b.Loop() {
		appendVisible(targets[0])
		appendVisible(targets[1])
	}
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Microseconds()) / 1e3 / float64(len(ds))
	}
	for _, t := range targets {
		b.Logf("%s: %v", t.s.ID, t.lats)
	}
	b.ReportMetric(mean(targets[0].lats), "ms/append-visible")
	b.ReportMetric(float64(slices.Max(targets[0].lats).Microseconds())/1e3, "ms/append-visible-max")
	b.ReportMetric(mean(targets[1].lats), "ms/append-visible-small")
	b.ReportMetric(float64(targets[0].size)/1e6, "MB/big-transcript")
}

// BenchmarkDaemonColdScan times a host's start up to its catalogue's
// first page being listed (s/first-page: from host.New until
// listSessions shows rows, the newest, which the catalogue reads first)
// and up to its whole first scan being published (s/cold-scan), with the
// corpus's pages in the page cache, and the resident memory that added
// by then (MB/peak-rss-growth, VmHWM reset before; MB/rss-growth,
// VmRSS). Memory is the test process's: the host, plus a client that
// queues its frames undecoded (a few hundred kB). The first run, not
// counted among them, starts with the corpus's pages dropped from the
// page cache (s/first-page-uncached, s/cold-scan-uncached), as after a
// reboot.
func BenchmarkDaemonColdScan(b *testing.B) {
	projects, _ := cbCorpus(b)
	var paths []string
	err := filepath.WalkDir(projects, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}

	type result struct {
		page, scan time.Duration
		peak, grew int64
		listed     int
	}
	run := func(evict bool) result {
		state, err := os.MkdirTemp("", "ahpd-cold-scan-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(state)
		// The mode is stored before the host starts, as a restart finds
		// it, so rows are listed as soon as the scan publishes them.
		if err := os.WriteFile(filepath.Join(state, "root-config.json"), []byte(`{"showExternalSessions":"last30Days"}`), 0o600); err != nil {
			b.Fatal(err)
		}
		if evict {
			benchMust(b, corpus.Evict(paths))
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := corpus.ResetPeakRSS(); err != nil {
			b.Logf("cannot reset the peak RSS (%v): the figure includes earlier peaks", err)
		}
		rss0 := procStat(b, "VmRSS")

		start := time.Now()
		th := cbStartHost(b, state, projects, cbClock())
		defer th.stop()
		c := cbDial(b, th.url)
		defer c.close()
		c.waitScanned(b, 5*time.Minute)
		r := result{page: time.Since(start)}
		th.awaitScan(b)
		r.scan = time.Since(start)
		r.peak = procStat(b, "VmHWM") - rss0
		r.grew = procStat(b, "VmRSS") - rss0

		all := c.listAll(b)
		c.waitAdded(b, len(all))
		r.listed = len(all)
		b.Logf("evicted %v: first page listed after %v, the whole scan after %v, %d rows; RSS +%.1f MB (peak +%.1f MB); once announced and paged, RSS +%.1f MB (peak +%.1f MB)",
			evict, r.page, r.scan, r.listed, float64(r.grew)/(1<<20), float64(r.peak)/(1<<20),
			float64(procStat(b, "VmRSS")-rss0)/(1<<20), float64(procStat(b, "VmHWM")-rss0)/(1<<20))
		return r
	}

	uncached := run(true)
	var sum result
	n := 0
	for b.Loop() {
		r := run(false)
		sum.page += r.page
		sum.scan += r.scan
		sum.peak = max(sum.peak, r.peak)
		sum.grew = max(sum.grew, r.grew)
		sum.listed = r.listed
		n++
	}
	b.ReportMetric(uncached.page.Seconds(), "s/first-page-uncached")
	b.ReportMetric(uncached.scan.Seconds(), "s/cold-scan-uncached")
	b.ReportMetric(sum.page.Seconds()/float64(n), "s/first-page")
	b.ReportMetric(sum.scan.Seconds()/float64(n), "s/cold-scan")
	b.ReportMetric(float64(sum.peak)/(1<<20), "MB/peak-rss-growth")
	b.ReportMetric(float64(sum.grew)/(1<<20), "MB/rss-growth")
	b.ReportMetric(float64(sum.listed), "rows-listed")
}

func benchMust(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// procStat returns a /proc/self/status figure in bytes.
func procStat(b *testing.B, key string) int64 {
	n, err := corpus.ProcStatus(key)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
