package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// startBenchHost is startHost for benchmarks: it logs nothing.
func startBenchHost(b *testing.B) *testHost {
	b.Helper()
	return startBenchHostIn(b, b.TempDir())
}

func startBenchHostIn(b *testing.B, state string, opts ...hostOption) *testHost {
	b.Helper()
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		b.Fatal(err)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		b.Fatal(err)
	}
	o := host.Options{StateDir: state, Backends: backends, Logger: slog.New(slog.DiscardHandler), DefaultDirectory: work}
	for _, opt := range opts {
		opt(&o)
	}
	h, err := host.New(o)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(false, ""))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		srv.Close()
	})
	return &testHost{h: h, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http"), state: state, work: work}
}

// rawClient reads frames without decoding them: a subscriber as cheap as
// a client can be, so a benchmark measures the host.
type rawClient struct {
	ws   *websocket.Conn
	next int
}

func dialRaw(b testing.TB, url, chat string) *rawClient {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	b.Cleanup(func() { _ = ws.Close(websocket.StatusNormalClosure, "") })
	r := &rawClient{ws: ws}
	r.call(b, 1, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": "raw"})
	r.call(b, 2, "subscribe", map[string]any{"channel": chat})
	return r
}

func (r *rawClient) call(b testing.TB, id int, method string, params any) {
	b.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := r.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	want := []byte(`"id":` + string(rune('0'+id)) + `,`)
	r.waitForBytes(b, want)
}

// roundTrip sends a request and returns the response frame, undecoded.
func (r *rawClient) roundTrip(b testing.TB, method string, params any) []byte {
	b.Helper()
	r.next++
	id := 1000 + r.next
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err := r.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	want := []byte(fmt.Sprintf(`"id":%d,`, id))
	for {
		_, data, err := r.ws.Read(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(data, want) {
			return data
		}
	}
}

func (r *rawClient) waitFor(b testing.TB, s string) { r.waitForBytes(b, []byte(s)) }

func (r *rawClient) waitForBytes(b testing.TB, want []byte) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	for {
		_, data, err := r.ws.Read(ctx)
		if err != nil {
			b.Fatalf("waiting for %s: %v", want, err)
		}
		if bytes.Contains(data, want) {
			return
		}
	}
}
