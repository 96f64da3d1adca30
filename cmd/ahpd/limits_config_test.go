package main

import (
	"io"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host"
)

// TestAttachedSessionsSetting: limits.attachedSessions is the host's
// Limits.AttachedSessions, 20 when left out; a negative one is refused.
func TestAttachedSessionsSetting(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		file string
		want int
		err  string
	}{
		{file: "limits: {inFlight: 8}\n", want: host.DefaultAttached},
		{file: "limits: {attachedSessions: 5}\n", want: 5},
		{file: "limits: {attachedSessions: -1}\n", err: "attached sessions is -1"},
	} {
		cfg, err := parseConfig([]string{"--config", writeConfig(t, e, tc.file)}, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.file, err)
		}
		if got := cfg.Limits.host().WithDefaults().AttachedSessions; got != tc.want {
			t.Errorf("%q: attachedSessions %d, want %d", tc.file, got, tc.want)
		}
	}
}
