package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
)

// pathWithout is $PATH less the folders holding a program called name,
// for a daemon that must not find it.
func pathWithout(name string) string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// apiCall sends a request to the daemon's HTTP API with token and returns
// the status and the decoded body.
func apiCall(t *testing.T, p *proc, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(data))
	}
	req, err := http.NewRequest(method, "http://"+p.addr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode, out
}

// TestNoAgentIsARefusal: on a daemon with no real agent (no claude on
// its PATH, no ACP agent declared), whatever names no provider is
// refused saying how to get one: `ahpd run` exits 2, POST /v1/sessions is
// 400 no_agent, an automation is refused as it is made. Named, the script
// backend still runs.
func TestNoAgentIsARefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.extraEnv = []string{"PATH=" + pathWithout("claude")}
	p := serveDaemon(t, e)

	r := cli(t, e, "run", "say hello")
	if r.code != exitUsage || strings.Contains(r.stdout, "hello") ||
		!strings.Contains(r.stderr, "install the Claude Code CLI (npm install -g @anthropic-ai/claude-code)") ||
		!strings.Contains(r.stderr, "declare an ACP agent") || !strings.Contains(r.stderr, "`--provider script` runs the built-in script backend") {
		t.Fatalf("ahpd run with no agent: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, e, "run", "--provider", "script", "say hello"); r.code != 0 || !strings.Contains(r.stdout, "hello") || !strings.Contains(r.stderr, "on script") {
		t.Fatalf("ahpd run --provider script: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	status, body := apiCall(t, p, e.token(t), "POST", "/v1/sessions", map[string]any{"input": "say hello"})
	apiErr, _ := body["error"].(map[string]any)
	if status != http.StatusBadRequest || apiErr["code"] != "no_agent" || !strings.Contains(apiErr["message"].(string), "install the Claude Code CLI") ||
		!strings.Contains(apiErr["message"].(string), `"provider": "script"`) {
		t.Fatalf("POST /v1/sessions with no agent: %d %v", status, body)
	}

	r = cli(t, e, "automations", "add", "--id", "nightly", "--message", "say x", "--cron", "0 2 * * *")
	if r.code != exitFailed || !strings.Contains(r.stderr, "install the Claude Code CLI") {
		t.Fatalf("automations add with no agent: exit %d, %q", r.code, r.stderr)
	}
	if entries := automationEntries(t, e); len(entries) != 0 {
		t.Errorf("the refused automation was made: %+v", entries)
	}
}

// TestClaudeIsTheDefault: with the Claude Code CLI on the daemon's PATH
// (the real CLI, against a mock of the model API), `ahpd run` naming no
// provider runs Claude, not the script backend.
func TestClaudeIsTheDefault(t *testing.T) {
	t.Parallel()
	f := newClaudeFixture(t)
	// The fixture names the CLI in the config; found on PATH instead, it
	// is what a person who installed it has.
	var cfg struct {
		Plugins []map[string]any `json:"plugins"`
	}
	data, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg.Plugins[0], "command")
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(f.e.root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.cli, filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	f.e.extraEnv = []string{"PATH=" + bin + string(filepath.ListSeparator) + pathWithout("claude")}
	f.serve(t)

	f.mock.Enqueue(claudetest.Text("Hello from Claude."))
	r := cli(t, f.e, "run", "say hello")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello from Claude.") || !strings.Contains(r.stderr, "on claude") {
		t.Fatalf("ahpd run with claude on PATH: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if reqs := f.mock.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].UserText(), "say hello") {
		t.Errorf("the model was asked %d times", len(reqs))
	}
}

// TestConfigProviders: defaultProvider, and a declared automation's
// provider, must name one of the daemon's agents.
func TestConfigProviders(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ yaml, want string }{
		{"defaultProvider: gemini\n", `defaultProvider "gemini" is none of ahpd's agents ([claude script])`},
		{"plugins: [{name: gemini, kind: acp, command: gemini}]\ndefaultProvider: gemini\n", ""},
		{"defaultProvider: script\n", ""},
		{"automations:\n  - {id: x, title: X, message: say x, session: {provider: nobody}}\n", `automations[0].session.provider: "nobody" is none of ahpd's agents`},
	} {
		_, err := parseConfig([]string{"--config", writeConfig(t, e, tt.yaml), "--state-dir", e.state}, io.Discard)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%q: %v, want %q", tt.yaml, err, tt.want)
		}
	}
}
