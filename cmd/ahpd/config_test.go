package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/host/hosttest"
)

// writeConfig writes a YAML config file into e and returns its path.
func writeConfig(t testing.TB, e *env, yaml string) string {
	t.Helper()
	path := filepath.Join(e.root, "ahpd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// exists reports whether path exists.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestConfigFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	state := filepath.Join(e.root, "file-state")
	config := writeConfig(t, e, `
listen: 127.0.0.1:0
stateDir: `+state+`
sessions: memory
logLevel: debug
connectionToken: from-the-file
`)
	p := launch(t, e, 0, "--config", config)
	p.awaitListening()
	checkToken(t, p, "from-the-file")
	connect(t, p, "from-the-file", "c1").Close()
	if !exists(t, state) {
		t.Errorf("the stateDir %s of the file was not made", state)
	}
	// The file store keeps its records in <state>/sessions.
	if exists(t, filepath.Join(state, "sessions")) {
		t.Error("sessions: memory in the file, yet sessions are kept in files")
	}
	p.waitStderr("level=DEBUG", startTimeout)
}

func TestConfigFlagsWin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fileState := filepath.Join(e.root, "file-state")
	tokenFile := filepath.Join(e.root, "token")
	if err := os.WriteFile(tokenFile, []byte("from-a-flag\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every key is one a flag overrides: port 1 is never what a daemon
	// started with --listen 127.0.0.1:0 announces.
	config := writeConfig(t, e, `
listen: 127.0.0.1:1
stateDir: `+fileState+`
sessions: memory
logLevel: debug
connectionToken: from-the-file
`)
	p := launch(t, e, 0, "--config", config,
		"--listen", "127.0.0.1:0", "--state-dir", e.state, "--sessions", "file",
		"--log-level", "error", "--connection-token-file", tokenFile)
	p.awaitListening()
	// A token option on the command line replaces the file's choice,
	// even another of the three.
	checkToken(t, p, "from-a-flag")
	if got := handshake(t, p.url("from-the-file"), nil); got != http.StatusUnauthorized {
		t.Errorf("the file's token: handshake status %d, want 401", got)
	}
	if exists(t, fileState) {
		t.Errorf("the file's stateDir %s was made despite --state-dir", fileState)
	}
	if !exists(t, filepath.Join(e.state, "sessions")) {
		t.Error("--sessions file did not keep sessions in files")
	}
	p.terminate()
	if s := p.stderr.String(); strings.Contains(s, "level=DEBUG") || strings.Contains(s, "level=INFO") {
		t.Errorf("--log-level error still logs below errors:\n%s", s)
	}
}

func TestConfigFileRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	config := writeConfig(t, e, "listen: 127.0.0.1:0\nlisten_addr: 127.0.0.1:0\n")
	p := launch(t, e, 0, "--config", config, "--state-dir", e.state)
	if code := p.wait(exitTimeout); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if s := p.stderr.String(); !strings.Contains(s, "ahpd: config file "+config) || !strings.Contains(s, "listen_addr") {
		t.Errorf("stderr does not name the file and the key:\n%s", s)
	}
	if out := p.stdoutLines(); len(out) != 0 {
		t.Errorf("stdout = %q, want nothing", out)
	}
}

func TestConfigFileMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	missing := filepath.Join(e.root, "nope.yaml")
	p := launch(t, e, 0, "--config", missing, "--state-dir", e.state)
	if code := p.wait(exitTimeout); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if s := p.stderr.String(); !strings.Contains(s, "ahpd: reading the config file: ") || !strings.Contains(s, missing) {
		t.Errorf("stderr does not name the missing file:\n%s", s)
	}
}

// TestResidencySettings checks the two residency settings: their defaults,
// the file's values, and flags over the file.
func TestResidencySettings(t *testing.T) {
	e := newEnv(t)
	cfg, err := parseConfig([]string{"--state-dir", e.state}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SleepAfterMinutes != 30 || cfg.SessionResidencyLimit != 10 {
		t.Errorf("defaults: sleep after %v minutes, limit %d; want 30 and 10", cfg.SleepAfterMinutes, cfg.SessionResidencyLimit)
	}
	file := writeConfig(t, e, "sleepAfterMinutes: 0.5\nsessionResidencyLimit: 0\n")
	cfg, err = parseConfig([]string{"--config", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SleepAfterMinutes != 0.5 || cfg.SessionResidencyLimit != 0 {
		t.Errorf("from the file: %v, %d; want 0.5 and 0", cfg.SleepAfterMinutes, cfg.SessionResidencyLimit)
	}
	cfg, err = parseConfig([]string{"--config", file, "--sleep-after-minutes", "0", "--session-residency-limit", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SleepAfterMinutes != 0 || cfg.SessionResidencyLimit != 3 {
		t.Errorf("flags over the file: %v, %d; want 0 and 3", cfg.SleepAfterMinutes, cfg.SessionResidencyLimit)
	}
	if _, err := parseConfig([]string{"--session-residency-limit", "-1"}, io.Discard); err == nil {
		t.Error("a negative limit was taken")
	}
}

// TestFileChangedDebounce: the automations' debounce window from the
// config file, within its bounds.
func TestFileChangedDebounce(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		yaml string
		want time.Duration
		err  string
	}{
		{"", 0, ""},
		{"fileChangedDebounce: 750ms\n", 750 * time.Millisecond, ""},
		{"fileChangedDebounce: 1ms\n", 0, "fileChangedDebounce: 1ms is not between 10ms and 10s"},
		{"fileChangedDebounce: 1m\n", 0, "fileChangedDebounce: 1m0s is not between 10ms and 10s"},
	} {
		cfg, err := parseConfig([]string{"--state-dir", e.state, "--config", writeConfig(t, e, tc.yaml+"\n")}, io.Discard)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.err == "" && cfg.FileChangedDebounce != tc.want:
			t.Errorf("%q: %v, want %v", tc.yaml, cfg.FileChangedDebounce, tc.want)
		}
	}
}

// TestQuietSessionSleepsInTheDaemon runs the daemon with a sleep of under a
// second and watches the probe turn a session inactive.
func TestQuietSessionSleepsInTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e, "--sleep-after-minutes", "0.005")
	c := connect(t, p, e.token(t), "c1")
	session, chat := newSession(t, c, e, "s1")
	send(t, c, chat, "t1", "say hi")
	c.Close()
	probe := connect(t, p, e.token(t), "probe")
	deadline := time.Now().Add(startTimeout)
	for {
		raw := probe.MustCall("ahpd/sessionStatus", map[string]any{"channel": session})
		if string(raw) == `{"status":"inactive"}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session stayed %s", raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAllowedRoots checks --allowed-roots and allowedRoots: the file's
// roots hold, the flag's replace them, and a bad root in the file stops
// the start as a usage error.
func TestAllowedRoots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fileRoot, flagRoot := filepath.Join(e.root, "from-file"), filepath.Join(e.root, "from-flag")
	for _, d := range []string{fileRoot, flagRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	config := writeConfig(t, e, "allowedRoots:\n  - "+fileRoot+"\n")
	n := 0
	create := func(c *hosttest.Client, dir string) *hosttest.RPCError {
		n++
		_, err := c.Call("createSession", map[string]any{
			"channel": fmt.Sprintf("ahp-session:/r%d", n), "provider": "script", "workingDirectories": []string{"file://" + dir},
		})
		return err
	}
	refused := func(what string, err *hosttest.RPCError, root string) {
		t.Helper()
		if err == nil || err.Code != -32009 || !strings.HasSuffix(err.Message, "is outside the allowed roots: "+root) {
			t.Errorf("%s: %v, want -32009 naming %s", what, err, root)
		}
	}

	p := serveDaemon(t, e, "--config", config)
	c := connect(t, p, e.token(t), "c1")
	if err := create(c, fileRoot); err != nil {
		t.Errorf("in the file's root: %v", err)
	}
	refused("outside the file's root", create(c, e.work), fileRoot)
	c.Close()
	p.terminate()
	p.wait(exitTimeout)

	p = serveDaemon(t, e, "--config", config, "--allowed-roots", flagRoot)
	c = connect(t, p, e.token(t), "c2")
	if err := create(c, flagRoot); err != nil {
		t.Errorf("in the flag's root: %v", err)
	}
	refused("in the file's root, replaced by the flag's", create(c, fileRoot), flagRoot)
	c.Close()
	p.terminate()
	p.wait(exitTimeout)

	missing := filepath.Join(e.root, "gone")
	config = writeConfig(t, e, "allowedRoots: ["+missing+"]\n")
	p = launch(t, e, 0, "--config", config, "--state-dir", e.state)
	if code := p.wait(exitTimeout); code != 2 {
		t.Errorf("a missing root in the file: exit status %d, want 2", code)
	}
	if s := p.stderr.String(); !strings.HasPrefix(s, "ahpd: allowed root "+strconv.Quote(missing)) {
		t.Errorf("a missing root in the file: stderr %q", s)
	}
}

// TestPermissionsSettings: the config file's permissions and inputTimeout
// are the host's defaults for sessions that set none, read as a session's
// config values are; a value that does not fit stops the start with the
// key named and why.
func TestPermissionsSettings(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		file    string
		perms   string // the permissions the host gets, encoded
		timeout time.Duration
		err     string
	}{
		{file: "logLevel: info\n", perms: `{"mode":"ask"}`},
		{file: "permissions: {mode: bypass}\n", perms: `{"mode":"bypass"}`},
		{file: "permissions: {}\ninputTimeout:\n", perms: `{"mode":"ask"}`},
		{file: "permissions:\n  mode: acceptEdits\n  allow: [execute, \"edit(src/**)\"]\n  deny: [WebFetch]\n",
			perms: `{"mode":"acceptEdits","allow":["execute","edit(src/**)"],"deny":["WebFetch"]}`},
		{file: "inputTimeout: 30m\n", perms: `{"mode":"ask"}`, timeout: 30 * time.Minute},
		{file: "inputTimeout: 1h30m\n", perms: `{"mode":"ask"}`, timeout: 90 * time.Minute},
		{file: "inputTimeout: 600\n", perms: `{"mode":"ask"}`, timeout: 10 * time.Minute},
		{file: "inputTimeout: 0\n", perms: `{"mode":"ask"}`},
		{file: "inputTimeout: \"0\"\n", perms: `{"mode":"ask"}`},

		{file: "permissions: {mode: yolo}\n", err: `config file: permissions: mode: "yolo" is not ask, acceptEdits or bypass`},
		{file: "permissions: {mode: ask, denny: [Bash]}\n", err: `config file: permissions: member "denny": not one permissions have (mode, allow, deny)`},
		{file: "permissions: bypass\n", err: "config file: permissions: want an object"},
		{file: "permissions: [bypass]\n", err: "config file: permissions: want an object"},
		{file: "permissions: {deny: [\"Bash(git *\"]}\n", err: `config file: permissions: deny[0]: "Bash(git *": a glob ends with ")"`},
		{file: "permissions: {allow: [\"edit(/etc/**)\"]}\n", err: "config file: permissions: allow[0]: \"edit(/etc/**)\": a glob is relative"},
		{file: "permissions: {allow: execute}\n", err: `config file: permissions: member "allow"`},
		{file: "inputTimeout: soon\n", err: `config file: inputTimeout: "soon": want a duration from 1s to 720h`},
		{file: "inputTimeout: 500ms\n", err: `config file: inputTimeout: "500ms": want a duration`},
		{file: "inputTimeout: 721h\n", err: `config file: inputTimeout: "721h": want a duration`},
		{file: "inputTimeout: -5\n", err: `config file: inputTimeout: "-5": want a duration`},
		{file: "inputTimeout: [30m]\n", err: "config file: inputTimeout: that: want a duration"},
	} {
		cfg, err := parseConfig([]string{"--state-dir", e.state, "--config", writeConfig(t, e, tc.file)}, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.file, err)
			continue
		}
		if got := string(cfg.defaultPermissions.Encode()); got != tc.perms || cfg.defaultInputTimeout != tc.timeout {
			t.Errorf("%q: permissions %s, inputTimeout %v; want %s, %v", tc.file, got, cfg.defaultInputTimeout, tc.perms, tc.timeout)
		}
	}
}
