package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahpd/ahpd/httpapi"
	"github.com/ahpd/ahpd/internal/testwait"
)

// waitStreams waits until the principal who holds want event streams.
func (e *env) waitStreams(t *testing.T, who string, want int) {
	t.Helper()
	hang := time.NewTimer(testwait.Hang)
	defer hang.Stop()
	for {
		n, changed := e.api.OpenStreams(who)
		if n == want {
			return
		}
		select {
		case <-changed:
		case <-hang.C:
			t.Fatalf("%s holds %d event streams, want %d", who, n, want)
		}
	}
}

// refusedStream asks for an event stream that must be refused, and
// returns the answer and its error.
func (e *env) refusedStream(t *testing.T, who, path string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testwait.Context(t), "GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("GET %s as %s: 200, want a refusal", path, who)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %d, a body that is not JSON: %v", path, resp.StatusCode, err)
	}
	errObj, _ := out["error"].(map[string]any)
	return resp, errObj
}

// TestStreamBudget: a person holds at most MaxStreamsPerPerson event
// streams open, over every events route; the next is 429
// too_many_streams with Retry-After, and counts for nothing; a stream
// ending (its client gone, or the host closed) gives its place back.
// Another person's budget is their own.
func TestStreamBudget(t *testing.T) {
	const limit = 3
	metrics, logs := httpapi.NewMetrics(), &records{}
	e := newEnvWith(t, func(o *httpapi.Options) {
		o.MaxStreamsPerPerson, o.Metrics, o.Logger = limit, metrics, slog.New(logs)
	})
	e.must(201, "mo", "POST", "/v1/sessions", map[string]any{"id": "watched", "config": map[string]any{"sharing": "read"}})
	const gus, mo = "user:gus", "user:mo"

	var open []*stream
	for _, path := range []string{"/v1/automations/events", "/v1/automations/events", "/v1/sessions/watched/events"} {
		s := e.events("gus", path)
		if ready := s.next(t); ready.event != "ready" {
			t.Fatalf("GET %s: first %v", path, ready)
		}
		open = append(open, s)
	}
	e.waitStreams(t, gus, limit)

	resp, errObj := e.refusedStream(t, "gus", "/v1/automations/events")
	if resp.StatusCode != http.StatusTooManyRequests || errObj["code"] != "too_many_streams" || errObj["message"] == "" {
		t.Fatalf("a stream past the budget: %d %v, want 429 too_many_streams", resp.StatusCode, errObj)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	if resp, _ := e.refusedStream(t, "gus", "/v1/automations/events"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("sent again: %d", resp.StatusCode)
	}
	if n, _ := e.api.OpenStreams(gus); n != limit {
		t.Errorf("after a refusal gus holds %d, want %d", n, limit)
	}
	// Another person streams on.
	theirs := e.events("mo", "/v1/sessions/watched/events")
	theirs.next(t)
	e.waitStreams(t, mo, 1)

	// A client that goes away gives its place back, and another stream
	// takes it.
	open[0].close()
	e.waitStreams(t, gus, limit-1)
	again := e.events("gus", "/v1/automations/events")
	if ready := again.next(t); ready.event != "ready" {
		t.Fatalf("a stream in the place given back: first %v", ready)
	}
	open[0] = again
	e.waitStreams(t, gus, limit)

	// A stream refused on its way (no such session) holds no place.
	e.events("mo", "/v1/automations/events").next(t)
	e.events("mo", "/v1/automations/events").next(t)
	if resp, errObj := e.refusedStream(t, "mo", "/v1/sessions/nope/events"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("mo's fourth stream: %d %v, want 429", resp.StatusCode, errObj)
	}
	theirs.close()
	e.waitStreams(t, mo, limit-1)
	if resp, errObj := e.refusedStream(t, "mo", "/v1/sessions/nope/events"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a stream of no session: %d %v, want 404", resp.StatusCode, errObj)
	}
	e.waitStreams(t, mo, limit-1)

	// The host closing ends every stream, and every place is given back.
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if err := e.host.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range open {
		for ev := s.next(t); ev.event != "end"; ev = s.next(t) {
		}
	}
	e.waitStreams(t, gus, 0)
	e.waitStreams(t, mo, 0)

	got := gather(t, metrics)
	if got["ahpd_http_event_streams_refused_total"] != 3 || got["ahpd_http_event_streams"] != 0 {
		t.Errorf("metrics %v, want 3 refused and none open", got)
	}
	// A refusal sent again in a row is not logged again.
	if refused := logs.find("refused an event stream"); len(refused) != 2 || refused[0] != gus || refused[1] != mo {
		t.Errorf("logged the refusals of %v, want gus's once, then mo's", refused)
	}
}

// records keeps the messages logged, with each one's principal.
type records struct {
	mu   sync.Mutex
	msgs [][2]string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	var who string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "principal" {
			who = a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, [2]string{rec.Message, who})
	return nil
}

// find returns the principals of the messages that start with prefix.
func (r *records) find(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if strings.HasPrefix(m[0], prefix) {
			out = append(out, m[1])
		}
	}
	return out
}

// gather reads the API's unlabelled metrics by name.
func gather(t *testing.T, m *httpapi.Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			switch {
			case mt.Gauge != nil:
				out[f.GetName()] = mt.Gauge.GetValue()
			case mt.Counter != nil:
				out[f.GetName()] = mt.Counter.GetValue()
			}
		}
	}
	return out
}
