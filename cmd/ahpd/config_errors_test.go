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
