package main

import (
	"io"
	"strings"
	"testing"
)

// TestConfigKeyErrors: a key the config file does not take is named as
// written, with the key it likely meant and those allowed at its place.
func TestConfigKeyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string // in the error, in order
		not        []string // not in it
	}{
		{"a slip at the top", "lissten: 127.0.0.1:1\n",
			[]string{`line 1: unknown key "lissten" (did you mean "listen"?)`, "the keys allowed there are", "logFormat", "worktreesRoot"},
			[]string{"main.config", "not found in type"}},
		{"a slip in a section", "journal:\n  maxAg: 1h\n",
			[]string{`line 2: unknown key "maxAg" (did you mean "maxAge"?)`, "allowed there are maxAge, maxBytesPerSession"},
			[]string{"listen"}},
		{"two at once", "limits:\n  handshak: 1s\nsesions: file\n",
			[]string{`line 2: unknown key "handshak" (did you mean "handshake"?)`, "identifierBytes", `line 3: unknown key "sesions" (did you mean "sessions"?)`},
			nil},
		{"nothing near", "frobnicate: 1\n",
			[]string{`line 1: unknown key "frobnicate"; the keys allowed there are`},
			[]string{"did you mean"}},
		{"a huge key", strings.Repeat("k", 1000) + ": 1\n",
			[]string{`unknown key "` + strings.Repeat("k", 64) + `…"`},
			[]string{strings.Repeat("k", 65)}},
		{"a value of the wrong kind passes as the decoder says it", "sessionResidencyLimit: many\n",
			[]string{"cannot unmarshal"},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg := defaults()
			err := readConfigFile(writeConfig(t, e, tt.yaml), &cfg)
			if err == nil {
				t.Fatal("the config file was taken")
			}
			msg, at := err.Error(), 0
			for _, w := range tt.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("the error\n%s\nhas not %q (after byte %d)", msg, w, at)
				}
				at += i + len(w)
			}
			for _, n := range tt.not {
				if strings.Contains(msg, n) {
					t.Errorf("the error\n%s\nhas %q", msg, n)
				}
			}
		})
	}
}

// TestOperatorFlagErrors: flags that cannot work as given are refused,
// saying what to give instead.
func TestOperatorFlagErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pprof"}, "give --metrics-listen too"},
		{[]string{"--log-format", "xml"}, `--log-format: "xml" is not text or json`},
		{[]string{"--log-level", "loud"}, `--log-level: "loud" is not debug`},
	} {
		_, err := parseConfig(append([]string{"--state-dir", e.state}, tc.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseConfig([]string{"--state-dir", e.state, "--pprof", "--metrics-listen", "127.0.0.1:0", "--log-format", "json"}, io.Discard); err != nil {
		t.Errorf("--pprof with --metrics-listen, JSON logs: %v", err)
	}
}

// TestEnvSettings: every daemon flag may be given as an AHPD_ variable;
// a flag wins over it, and it wins over the config file.
func TestEnvSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := writeConfig(t, e, "listen: 127.0.0.1:5678\nconnectionTokenFile: /nonexistent\nsleepAfterMinutes: 5\n")
	env := map[string]string{
		"AHPD_CONFIG":                  file,
		"AHPD_LISTEN":                  "127.0.0.1:1234",
		"AHPD_CONNECTION_TOKEN":        "from-env",
		"AHPD_SESSION_RESIDENCY_LIMIT": "3",
		"AHPD_STATE_DIR":               e.state,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := parseConfigEnv(nil, lookup, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:1234" || cfg.ConnectionToken != "from-env" || cfg.ConnectionTokenFile != "" ||
		cfg.SessionResidencyLimit != 3 || cfg.SleepAfterMinutes != 5 || cfg.StateDir != e.state {
		t.Errorf("env over file: listen %s, token %q, token file %q, residency %d, sleep %v, state %s",
			cfg.Listen, cfg.ConnectionToken, cfg.ConnectionTokenFile, cfg.SessionResidencyLimit, cfg.SleepAfterMinutes, cfg.StateDir)
	}
	cfg, err = parseConfigEnv([]string{"--listen", "127.0.0.1:9999", "--without-connection-token"}, lookup, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || cfg.ConnectionToken != "" || !cfg.WithoutConnectionToken {
		t.Errorf("flags over env: listen %s, token %q, without %v", cfg.Listen, cfg.ConnectionToken, cfg.WithoutConnectionToken)
	}
	env["AHPD_SLEEP_AFTER_MINUTES"] = "soon"
	if _, err := parseConfigEnv(nil, lookup, io.Discard); err == nil || !strings.Contains(err.Error(), `AHPD_SLEEP_AFTER_MINUTES="soon"`) {
		t.Errorf("a bad AHPD_SLEEP_AFTER_MINUTES: %v", err)
	}
}
