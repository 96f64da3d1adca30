package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/protocol"
)

// busySessions is how many sessions run turns while
// BenchmarkListSessionsBusy lists.
const busySessions = 10

// BenchmarkListSessionsBusy answers listSessions' first page of 500 among
// 10,000 stored sessions, over a real WebSocket, quiet and then while 10
// more sessions run script turns without pause (each turn streams 300
// words in chunks of three; the next starts as the last is seen to end),
// driven over a WebSocket of their own. The busy sessions are the newest,
// so every page holds them.
//
// Each sub-benchmark reports the round trips' p50 and p90 (ms); quiet, in
// the same run, is the anchor busy is read against. turns/s is how many
// turns the busy sessions ended while the pages were read.
func BenchmarkListSessionsBusy(b *testing.B) {
	state := b.TempDir()
	storeSessions(b, state, filepath.Join(state, "work"), 10000)
	th := startBenchHostIn(b, state)
	c := dialRaw(b, th.url, protocol.RootURI)
	params := map[string]any{"channel": protocol.RootURI, "limit": 500}
	var r struct {
		Result protocol.ListSessionsResult `json:"result"`
	}
	if err := json.Unmarshal(c.roundTrip(b, "listSessions", params), &r); err != nil || len(r.Result.Items) != 500 {
		b.Fatalf("%d rows, %v", len(r.Result.Items), err)
	}
	var buf []byte
	measure := func(b *testing.B) []time.Duration {
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			buf = c.roundTripInto(b, buf, "listSessions", params)
			took = append(took, time.Since(start))
		}
		reportPercentiles(b, took)
		return took
	}
	b.Run("quiet", func(b *testing.B) { measure(b) })
	var d *busyDriver
	outer := b // the driver outlives each run of the sub-benchmark
	b.Run("busy", func(b *testing.B) {
		if d == nil {
			d = startBusy(outer, th, busySessions)
		}
		before, start := d.turns(), time.Now()
		measure(b)
		b.ReportMetric(float64(d.turns()-before)/time.Since(start).Seconds(), "turns/s")
	})
	if d != nil {
		d.stop(b)
	}
}

// reportPercentiles reports the p50 and p90 of took, in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1e3
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.9), "p90-ms")
	b.ReportMetric(0, "ns/op") // the percentiles are the figures
}

// busyDriver runs turns in its sessions without pause, over its own
// WebSocket, until stopped.
type busyDriver struct {
	c     *rawClient
	mu    sync.Mutex
	ended int
	err   error
	quit  bool // stop closed the connection: its reader's error is not one
	done  chan struct{}
	seq   int64
}

// busyScript is a turn of 300 words, streamed in chunks of three.
var busyScript = "say " + strings.TrimSpace(strings.Repeat("lorem ipsum dolor sit amet consectetur ", 50))

// startBusy makes n sessions and keeps a turn running in each.
func startBusy(b *testing.B, th *testHost, n int) *busyDriver {
	b.Helper()
	d := &busyDriver{c: dialRaw(b, th.url, protocol.RootURI), done: make(chan struct{})}
	chats := make([]string, n)
	for i := range chats {
		session := fmt.Sprintf("ahp-session:/busy%02d", i)
		d.c.roundTrip(b, "createSession", map[string]any{"channel": session, "provider": "script",
			"workingDirectories": []string{"file://" + th.work}})
		chats[i] = protocol.DefaultChatURI(session)
		d.c.roundTrip(b, "subscribe", map[string]any{"channel": chats[i]})
	}
	turn := map[string]int{}
	for _, chat := range chats {
		if err := d.send(chat, 1); err != nil {
			b.Fatal(err)
		}
		turn[chat] = 1
	}
	go func() {
		defer close(d.done)
		var data []byte
		for {
			var err error
			data, err = readInto(d.c.ws, data)
			if err != nil {
				d.fail(err)
				return
			}
			if bytes.Contains(data, []byte(`"type":"chat/error"`)) {
				d.fail(fmt.Errorf("a turn failed: %s", data))
				return
			}
			if !bytes.Contains(data, []byte(`"type":"chat/turnComplete"`)) {
				continue
			}
			var m struct {
				Params struct {
					Channel string `json:"channel"`
				} `json:"params"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				d.fail(err)
				return
			}
			d.mu.Lock()
			d.ended++
			d.mu.Unlock()
			turn[m.Params.Channel]++
			if err := d.send(m.Params.Channel, turn[m.Params.Channel]); err != nil {
				d.fail(err)
				return
			}
		}
	}()
	return d
}

func (d *busyDriver) send(chat string, n int) error {
	d.seq++
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "dispatchAction", "params": map[string]any{
		"channel": chat, "clientSeq": d.seq,
		"action": &protocol.ChatTurnStartedAction{
			TurnID: fmt.Sprintf("turn%d", n), StartedAt: protocol.FormatTime(time.Now()),
			Message: protocol.Message{Text: busyScript, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
		},
	}})
	if err := d.c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		return fmt.Errorf("starting turn %d of %s: %w", n, chat, err)
	}
	return nil
}

func (d *busyDriver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil && !d.quit {
		d.err = err
	}
}

func (d *busyDriver) turns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ended
}

// stop closes the driver's connection and fails on what its reader met
// before.
func (d *busyDriver) stop(b *testing.B) {
	d.mu.Lock()
	err := d.err
	d.quit = true
	d.mu.Unlock()
	_ = d.c.ws.CloseNow()
	<-d.done
	if err != nil {
		b.Fatal(err)
	}
}

// roundTripInto is roundTrip reading into buf, which it returns grown to
// what it read: the benchmark's own client, in the host's process, makes
// no garbage of the frames it reads for the host's collector to clear.
func (r *rawClient) roundTripInto(b testing.TB, buf []byte, method string, params any) []byte {
	b.Helper()
	r.next++
	id := 1000 + r.next
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := r.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	want := []byte(fmt.Sprintf(`"id":%d,`, id))
	for {
		var err error
		if buf, err = readInto(r.ws, buf); err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(buf, want) {
			return buf
		}
	}
}

// readInto reads the next frame into buf[:0], growing it as needed.
func readInto(ws *websocket.Conn, buf []byte) ([]byte, error) {
	_, rd, err := ws.Reader(context.Background())
	if err != nil {
		return buf, fmt.Errorf("reading a frame: %w", err)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, fmt.Errorf("reading a frame: %w", err)
		}
	}
}
