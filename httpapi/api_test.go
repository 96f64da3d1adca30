package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/automations/asowner"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/httpapi"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(lockcheck.Checked(m)) }

// env is a host with the script backend and a users directory (mo, a
// member; gus, a guest; the connection token "root-token"), serving the
// API as ahpd does: under /v1/ beside the WebSocket.
type env struct {
	t      *testing.T
	srv    *httptest.Server
	work   string
	tokens map[string]string
	api    *httpapi.API
	host   *host.Host
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the API's options changed by opts.
func newEnvWith(t *testing.T, opts func(*httpapi.Options)) *env {
	t.Helper()
	state := t.TempDir()
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts"))); err != nil {
		t.Fatal(err)
	}
	dir := grants.NewDirectory()
	tokens := map[string]string{"root": "root-token"}
	for _, u := range []struct {
		id   string
		role grants.Role
	}{{"mo", grants.Member}, {"gus", grants.Guest}} {
		if err := dir.Add(u.id, u.id, u.role); err != nil {
			t.Fatal(err)
		}
		if err := dir.SetMemberships(u.id, []grants.Membership{{Team: "core", Project: "ahpd", Primary: true}}); err != nil {
			t.Fatal(err)
		}
		tok, err := dir.IssueToken(u.id, "test")
		if err != nil {
			t.Fatal(err)
		}
		tokens[u.id] = tok
	}
	auth := &grants.Authenticator{Host: "test", ConnectionToken: "root-token", Users: dir}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(host.Options{StateDir: state, Backends: backends, Logger: log, Version: "test", DefaultDirectory: work, Auth: auth,
		Automations: host.AutomationOptions{NewRunner: func(h host.RunnerHost) automations.Runner { return asowner.New(h) }}})
	if err != nil {
		t.Fatal(err)
	}
	o := httpapi.Options{Host: h, Auth: auth, Logger: log, MinSeqWait: 200 * time.Millisecond}
	if opts != nil {
		opts(&o)
	}
	api := httpapi.New(o)
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/", h.Handler(false, ""))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing the host: %v", err)
		}
		srv.Close()
	})
	return &env{t: t, srv: srv, work: work, tokens: tokens, api: api, host: h}
}

// call sends a request as who and returns the status and the decoded
// JSON body (nil when there is none).
func (e *env) call(who, method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	status, _, out := e.callWith(nil, who, method, path, body)
	return status, out
}

// callWith is call with headers of its own, answering the answer's too.
func (e *env) callWith(header http.Header, who, method, path string, body any) (int, http.Header, map[string]any) {
	e.t.Helper()
	var r io.Reader
	if s, ok := body.(string); ok {
		r = strings.NewReader(s)
	} else if body != nil {
		data, _ := json.Marshal(body)
		r = strings.NewReader(string(data))
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if tok := e.tokens[who]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if who != "" {
		req.Header.Set("Authorization", "Bearer "+who)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, v := range header {
		req.Header[name] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			e.t.Fatalf("%s %s: the answer is not JSON: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// must is call expecting status.
func (e *env) must(status int, who, method, path string, body any) map[string]any {
	e.t.Helper()
	got, out := e.call(who, method, path, body)
	if got != status {
		e.t.Fatalf("%s %s as %s: status %d, want %d: %v", method, path, who, got, status, out)
	}
	return out
}

// stream is an open event stream.
type stream struct {
	cancel context.CancelFunc
	r      *bufio.Reader
	body   io.Closer
}

type sse struct {
	id, event string
	data      map[string]any
}

func (e *env) events(who, path string) *stream {
	e.t.Helper()
	// A hang guard only: an event that never comes fails the test in
	// two minutes rather than the run's ten.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{cancel: cancel, r: bufio.NewReader(resp.Body), body: resp.Body}
	e.t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	_ = s.body.Close()
}

// next reads the next event (comments skipped).
func (s *stream) next(t *testing.T) sse {
	t.Helper()
	var ev sse
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				t.Fatalf("an event's data is not JSON: %v", err)
			}
		}
	}
}

// until reads actions until one of type typ on a channel, and returns
// the action types seen.
func (s *stream) until(t *testing.T, typ string) []string {
	t.Helper()
	var seen []string
	for {
		ev := s.next(t)
		if ev.event != "action" {
			continue
		}
		a, _ := ev.data["action"].(map[string]any)
		at, _ := a["type"].(string)
		seen = append(seen, at)
		if at == typ {
			return seen
		}
	}
}
