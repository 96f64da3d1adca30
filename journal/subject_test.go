package journal

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Every session name maps to one valid subject token and back.
func TestSubjectRoundTrip(t *testing.T) {
	j := &Journal{cfg: Config{Subject: DefaultSubject}}
	for _, session := range []string{
		"claude:/6f1c2d3e-4b5a-4c6d-8e9f-000000000001",
		"ahp-session://x/a.b.c",
		"with space * and > and\ttab",
		"ünïcødé/セッション",
		"\x00\xff",
		strings.Repeat("z", MaxSessionBytes),
	} {
		subject := j.subject(session)
		token := strings.TrimPrefix(subject, DefaultSubject+".")
		if strings.ContainsAny(token, ".*> \t\r\n") || token == "" {
			t.Errorf("session %q: token %q is not a valid subject token", session, token)
		}
		if back, err := j.sessionOf(subject); err != nil || back != session {
			t.Errorf("session %q came back as %q, %v", session, back, err)
		}
	}
	if _, err := j.sessionOf("other.subject"); err == nil {
		t.Error("a subject outside the journal decoded")
	}
}

// The stream is compressed unless asked otherwise, and the other options
// still round-trip entries.
func TestStreamOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want jetstream.StoreCompression
	}{
		{"default", Config{}, jetstream.S2Compression},
		{"uncompressed and synced", Config{Uncompressed: true, SyncAlways: true}, jetstream.NoCompression},
		{"own names", Config{Stream: "OTHER", Subject: "other.prefix"}, jetstream.S2Compression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &harness{t: t, dir: t.TempDir()}
			j := h.open(tc.cfg)
			info, err := j.stream.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.Config.Compression != tc.want {
				t.Errorf("compression %v, want %v", info.Config.Compression, tc.want)
			}
			appendOK(t, j, s1, "kept")
			if got := readOK(t, j, []string{s1}, 0, 0); !equal(datas(got), []string{"kept"}) {
				t.Fatalf("read %v", datas(got))
			}
		})
	}
}
