package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/protocol"
)

func withLimits(l host.Limits) hostOption {
	return func(o *host.Options) { o.Limits = l }
}

// rawWS dials the host without a client on top: it reads only when told.
func rawWS(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

func writeJSON(t *testing.T, ws *websocket.Conn, v any) {
	t.Helper()
	data, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		data = string(b)
	}
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// readUntilClosed reads messages until the host closes, and returns them
// with the close frame.
func readUntilClosed(t *testing.T, ws *websocket.Conn) ([]string, websocket.CloseError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	var msgs []string
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("the connection ended without a close frame: %v", err)
			}
			return msgs, ce
		}
		msgs = append(msgs, string(data))
	}
}

// readOne reads the next message.
func readOne(t *testing.T, ws *websocket.Conn) protocol.RPCMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hosttest.Timeout)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m protocol.RPCMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return m
}

func initRaw(t *testing.T, ws *websocket.Conn, clientID string) {
	t.Helper()
	writeJSON(t, ws, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"channel": protocol.RootURI, "protocolVersions": []string{protocol.ProtocolVersion}, "clientId": clientID}})
	if m := readOne(t, ws); m.Error != nil {
		t.Fatalf("initialize: %s", m.Error.Message)
	}
}

// TestConnectionCuts checks each rule a client can break ends its
// connection with the code and reason that say which.
func TestConnectionCuts(t *testing.T) {
	th := startHost(t, "", withLimits(host.Limits{MessageBytes: 64 << 10, Initialize: 300 * time.Millisecond, Lifetime: -1}))
	for _, tc := range []struct {
		name   string
		send   func(ws *websocket.Conn)
		code   websocket.StatusCode
		reason string
	}{
		{"binary frame", func(ws *websocket.Conn) {
			_ = ws.Write(context.Background(), websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		}, websocket.StatusUnsupportedData, "binary frame"},
		{"message too big", func(ws *websocket.Conn) {
			writeJSON(t, ws, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "dispatchAction", "params": strings.Repeat("x", 100<<10)})
		}, websocket.StatusMessageTooBig, "more than 65536 bytes"},
		{"no initialize", func(ws *websocket.Conn) {
			writeJSON(t, ws, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		}, websocket.StatusPolicyViolation, "no initialize in 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := rawWS(t, th.url)
			tc.send(ws)
			_, ce := readUntilClosed(t, ws)
			if ce.Code != tc.code || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("closed with %d %q, want %d and %q", ce.Code, ce.Reason, tc.code, tc.reason)
			}
		})
	}
	if n := scrape(t, th)[`ahpd_connections_cut_total{reason="violation"}`]; n != 2 {
		t.Errorf("cut for violations: %v, want 2", n)
	}
}

// TestBadRequestsAnswered checks what admit refuses is answered, and the
// connection goes on: a command of megabytes is not decoded, an id of null
// (which jrpc2 took for a notification and never answered) is answered, a
// batch may hold no more than the requests that may be in flight.
func TestBadRequestsAnswered(t *testing.T) {
	th := startHost(t, "", withLimits(host.Limits{CommandBytes: 64 << 10, InFlight: 4}))
	ws := rawWS(t, th.url)
	initRaw(t, ws, "bad")
	pad := strings.Repeat("p", 100<<10)
	for _, tc := range []struct {
		send   string
		id     string
		answer string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"channel":"ahp-root://","pad":"` + pad + `"}}`, "1", `"subscribe" of 102` + "" /* bytes follow */},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", "id of null"},
		{`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 1000) + `","method":"ping"}`, "null", "request id of 1002 bytes"},
		{`[` + strings.Repeat(`{"jsonrpc":"2.0","id":9,"method":"ping"},`, 4) + `{"jsonrpc":"2.0","id":10,"method":"ping"}]`, "null", "a batch of 5 requests: at most 4"},
	} {
		writeJSON(t, ws, tc.send)
		m := readOne(t, ws)
		if m.Error == nil || string(m.ID) != tc.id || m.Error.Code != int64(protocol.CodeInvalidRequest) || !strings.Contains(m.Error.Message, tc.answer) {
			t.Errorf("%.60s: answered %s %+v, want id %s and %q", tc.send, m.ID, m.Error, tc.id, tc.answer)
		}
	}
	// Content is another matter: a prompt may be long.
	writeJSON(t, ws, `{"jsonrpc":"2.0","id":2,"method":"createSession","params":{"channel":"ahp-session:/long","provider":"script","pad":"`+pad+`"}}`)
	if m := readOne(t, ws); m.Error != nil && m.Error.Code == int64(protocol.CodeInvalidRequest) {
		t.Errorf("a long createSession: %s", m.Error.Message)
	}
	writeJSON(t, ws, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if m := readOne(t, ws); m.Error != nil || string(m.ID) != "3" {
		t.Errorf("ping after: %s %+v", m.ID, m.Error)
	}
}

// TestPipelinedRequestsWaitTheirTurn pipelines 200 createSession and
// subscribe pairs with four requests allowed in flight: every one is
// answered, in order, and no more than a few ever waited in line (200
// did before).
func TestPipelinedRequestsWaitTheirTurn(t *testing.T) {
	const inFlight = 4
	th := startHost(t, "", withLimits(host.Limits{InFlight: inFlight, AttachedSessions: 200}))
	c := th.client("pipe")
	var pending []*hosttest.Pending
	for i := range 200 {
		s := fmt.Sprintf("ahp-session:/p%d", i)
		pending = append(pending,
			c.Start("createSession", map[string]any{"channel": s, "provider": "script", "workingDirectories": []string{"file://" + th.work}}),
			c.Start("subscribe", map[string]any{"channel": s}))
	}
	for i, p := range pending {
		if _, err := p.Await(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	peak := th.h.PeakInLine()
	t.Logf("at most %d requests in line", peak)
	if peak > inFlight+1 {
		t.Errorf("%d requests waited in line at once, with %d allowed in flight", peak, inFlight)
	}
}

// TestIdleClientsPinged checks the idle deadline finds a peer that has
// gone (it answers no ping) and keeps one that is merely quiet.
func TestIdleClientsPinged(t *testing.T) {
	th := startHost(t, "", withLimits(host.Limits{Idle: 400 * time.Millisecond}))
	quiet := th.client("quiet") // its client answers pings as it reads
	gone := rawWS(t, th.url)
	initRaw(t, gone, "gone") // and never reads again
	stopped, done := th.h.Stopped("gone"), th.h.Leaving("gone")
	if len(stopped) != 1 || len(done) != 1 {
		t.Fatalf("the host holds %d connections of the gone client", len(done))
	}
	select {
	case <-stopped[0]:
	case <-time.After(hosttest.Timeout):
		t.Fatal("the gone client's connection was never cut")
	}
	// It waits for the close it is not sent; closing the socket ends the
	// wait, and the watchdog must not count the cut again meanwhile.
	_ = gone.CloseNow()
	select {
	case <-done[0]:
	case <-time.After(hosttest.Timeout):
		t.Fatal("the host never let go of the gone client's connection")
	}
	if n := scrape(t, th)[`ahpd_connections_cut_total{reason="deadline"}`]; n != 1 {
		t.Errorf("%v connections cut at a deadline, want the gone one", n)
	}
	// The quiet client said nothing for longer than the one cut.
	if _, err := quiet.Call("ping", nil); err != nil {
		t.Errorf("the quiet client: %v", err)
	}
}

// TestLifetime checks a connection is closed at its lifetime, saying so.
func TestLifetime(t *testing.T) {
	th := startHost(t, "", withLimits(host.Limits{Lifetime: 300 * time.Millisecond}))
	c := th.client("old")
	select {
	case <-c.Done():
	case <-time.After(hosttest.Timeout):
		t.Fatal("the connection outlived its lifetime")
	}
	var ce websocket.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "reconnect") {
		t.Errorf("closed with %v", c.Err())
	}
}

// TestSubscriptionLimit checks a connection watches no more channels than
// it may.
func TestSubscriptionLimit(t *testing.T) {
	th := startHost(t, "", withLimits(host.Limits{Subscriptions: 3}))
	c := th.client("subs")
	session, _ := th.newSession(c, "s1", nil) // root, the session and its chat
	other := "ahp-session:/s2"
	c.MustCall("createSession", map[string]any{"channel": other, "provider": "script", "workingDirectories": []string{"file://" + th.work}})
	if _, err := c.Call("subscribe", map[string]any{"channel": other}); err == nil || err.Code != int64(protocol.CodeInvalidRequest) || !strings.Contains(err.Message, "watches 3 channels") {
		t.Errorf("a fourth subscription: %v", err)
	}
	c.MustCall("unsubscribe", map[string]any{"channel": session})
	c.Subscribe(other)
}

// TestShutdownFinishesConnections checks a client at shutdown gets the
// answers to what the host took of its requests, whole and in order, and
// a close of 1000 saying why.
func TestShutdownFinishesConnections(t *testing.T) {
	th := startHost(t, "")
	ws := rawWS(t, th.url)
	initRaw(t, ws, "leaving")
	for i := 1; i <= 50; i++ {
		writeJSON(t, ws, map[string]any{"jsonrpc": "2.0", "id": i, "method": "listSessions", "params": map[string]any{"channel": protocol.RootURI}})
	}
	first := readOne(t, ws) // answers may come in any order
	if first.Error != nil {
		t.Fatalf("the first answer: %s %+v", first.ID, first.Error)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		th.stop()
	}()
	msgs, ce := readUntilClosed(t, ws)
	<-stopped
	if ce.Code != websocket.StatusNormalClosure || ce.Reason != "ahpd is shutting down" {
		t.Errorf("closed with %d %q", ce.Code, ce.Reason)
	}
	// Answers may come in any order; those that came are every request
	// up to some point, none missing, none in error.
	firstID, _ := strconv.Atoi(string(first.ID))
	answered := map[int]bool{firstID: true}
	for _, raw := range msgs {
		var m protocol.RPCMessage
		if err := json.Unmarshal([]byte(raw), &m); err != nil || m.ID == nil {
			continue // a notification
		}
		id, _ := strconv.Atoi(string(m.ID))
		if m.Error != nil || answered[id] {
			t.Fatalf("answer %s: %+v", m.ID, m.Error)
		}
		answered[id] = true
	}
	next := len(answered) + 1
	for id := range answered {
		if id >= next {
			t.Errorf("request %d was answered and %d was not", id, next-1)
		}
	}
	t.Logf("%d of 50 requests answered before the close", next-1)
}

// TestOnlyLocalHostNamesWithoutToken checks a host that asks no token
// serves only requests naming this machine: a page of another site, by a
// name that resolves to 127.0.0.1, gets nothing (DNS rebinding).
func TestOnlyLocalHostNamesWithoutToken(t *testing.T) {
	th := startHost(t, "")
	srv := httptest.NewServer(th.h.Handler(true, "127.0.0.1:9187"))
	defer srv.Close()
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"evil.example", false}, {"evil.example:9187", false}, {"127.0.0.1.nip.io", false},
		{"localhost:9187", true}, {"127.0.0.1:9187", true}, {"[::1]:9187", true}, {"app.localhost", true},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == http.StatusOK) != tc.ok {
			t.Errorf("Host %s: %s", tc.host, resp.Status)
		}
	}
	for _, tc := range []struct {
		host, listen string
		ok           bool
	}{
		{"192.168.1.5:9187", "192.168.1.5:9187", true},
		{"192.168.1.6:9187", "0.0.0.0:9187", true}, // an address is no rebinding
		{"ahpd.lan:9187", "ahpd.lan:9187", true},
		{"other.lan:9187", "ahpd.lan:9187", false},
		{"LOCALHOST.", "", true},
		{"localhost.evil.example", "", false},
	} {
		if got := host.LocalHost(tc.host, tc.listen); got != tc.ok {
			t.Errorf("localHost(%q, %q) = %v", tc.host, tc.listen, got)
		}
	}
}

// TestMetrics checks /metrics is behind the token and counts what
// happens.
func TestMetrics(t *testing.T) {
	th := startHost(t, "")
	c := th.client("m")
	_, chat := th.newSession(c, "s1", nil)
	send(t, c, chat, "t1", "say hi")
	// A turn's duration is observed once the turn's end is kept, after
	// clients are told of it.
	const observed = `ahpd_turn_duration_seconds_count{outcome="complete",provider="script"}`
	testwait.Until(t, "the turn's duration observed", func() bool { return scrape(t, th)[observed] == 1 })
	m := scrape(t, th)
	for name, want := range map[string]float64{
		"ahpd_connections": 1, "ahpd_sessions": 1, `ahpd_turns_total{outcome="complete"}`: 1,
		`ahpd_connections_cut_total{reason="slow"}`: 0, "ahpd_store_write_errors_total": 0,
		`ahpd_turn_duration_seconds_count{outcome="complete",provider="script"}`: 1,
		`ahpd_command_seconds_count{method="createSession"}`:                     1,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", name, got, ok, want)
		}
	}
	if m["ahpd_subscriptions"] < 3 {
		t.Errorf("ahpd_subscriptions = %v, want root, session and chat", m["ahpd_subscriptions"])
	}
}

var metricLine = regexp.MustCompile(`^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$`)

// scrape reads the host's metrics.
func scrape(t *testing.T, th *testHost) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(th.h.Handler(false, ""))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %s", resp.Status, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out
}

// TestMetricsBehindToken checks /metrics takes the host's own token and
// no person's.
func TestMetricsBehindToken(t *testing.T) {
	th, tokens := usersHost(t, "")
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {tokens["mo"], http.StatusForbidden}, {"root-token", http.StatusOK}} {
		resp, err := http.Get(th.srv.URL + "/metrics?tkn=" + tc.token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("token %q: %s, want %d", tc.token, resp.Status, tc.want)
		}
	}
}
