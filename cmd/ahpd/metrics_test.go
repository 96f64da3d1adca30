package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
)

// TestMetricsInTheDaemon checks /metrics beside AHP, behind the token, and
// on --metrics-listen without one; and that the config file's limits are
// the connections' limits.
func TestMetricsInTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	config := writeConfig(t, e, `
metricsListen: 127.0.0.1:0
pprof: true
limits:
  initialize: 200ms
  identifierBytes: 256
`)
	p := serveDaemon(t, e, "--config", config)
	p.waitStderr("serving metrics", startTimeout)
	addr := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(p.stderr.String())
	if addr == nil {
		t.Fatalf("no metrics address in stderr:\n%s", p.stderr.String())
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("http://" + addr[1] + "/metrics"); code != http.StatusOK || !strings.Contains(body, "ahpd_connections ") {
		t.Errorf("--metrics-listen: %d %.200s", code, body)
	}
	base := "http://" + p.addr + "/metrics"
	// The profiles are on the metrics listener, and only there.
	if code, body := get("http://" + addr[1] + "/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(body, "ahpd") {
		t.Errorf("pprof on the metrics listener: %d %.200q", code, body)
	}
	if code, body := get("http://" + p.addr + "/debug/pprof/cmdline?tkn=" + e.token(t)); code == http.StatusOK {
		t.Errorf("pprof beside AHP: %d %.200q", code, body)
	}
	// The probes answer on both listeners without a token, and say
	// nothing more.
	for _, at := range []string{addr[1], p.addr} {
		for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
			if code, body := get("http://" + at + path); code != http.StatusOK || body != want {
				t.Errorf("%s%s without a token: %d %q, want 200 %q", at, path, code, body, want)
			}
		}
	}
	if code, _ := get(base); code != http.StatusUnauthorized {
		t.Errorf("/metrics beside AHP without the token: %d", code)
	}
	// A URI longer than the config's 256 bytes is refused.
	w := connect(t, p, e.token(t), "long-uri")
	if _, err := w.Call("subscribe", map[string]any{"channel": "ahp-session:/" + strings.Repeat("x", 300)}); err == nil || !strings.Contains(err.Message, "at most 256") {
		t.Errorf("a URI of 313 bytes: %v", err)
	}
	w.Close()
	// A connection that never initializes is cut at the config's 200ms.
	c := hosttest.Dial(t, p.url(e.token(t)))
	select {
	case <-c.Done():
	case <-time.After(exitTimeout):
		t.Fatal("a connection without initialize stayed")
	}
	// An HTTP API request is timed by its route.
	if code, body := get("http://" + p.addr + "/v1/sessions?tkn=" + e.token(t)); code != http.StatusOK {
		t.Errorf("GET /v1/sessions: %d %.200s", code, body)
	}
	code, body := get(base + "?tkn=" + e.token(t))
	if code != http.StatusOK || !strings.Contains(body, `ahpd_connections_cut_total{reason="deadline"} 1`) {
		t.Errorf("/metrics with the token: %d %.2000s", code, body)
	}
	if want := `ahpd_http_request_seconds_count{code="200",route="GET /v1/sessions"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics has not %s", want)
	}
}
