package journal

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{MaxEntryBytes: 1000})
	long := strings.Repeat("u", MaxSessionBytes+1)
	many := make([]string, MaxReadSessions+1)
	for i := range many {
		many[i] = "s" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"append to empty session", func() error { _, err := j.Append(ctx, "", []byte("x")); return err }, ErrBadSession},
		{"append to long session", func() error { _, err := j.Append(ctx, long, []byte("x")); return err }, ErrBadSession},
		{"entry over MaxEntryBytes", func() error {
			_, err := j.Append(ctx, s1, []byte("ok"), bytes.Repeat([]byte("x"), 1001))
			return err
		}, ErrEntryTooLarge},
		{"batch over MaxBatch", func() error {
			_, err := j.Append(ctx, s1, make([][]byte, MaxBatch+1)...)
			return err
		}, ErrBatchTooLarge},
		{"read empty session", func() error { _, err := j.Read(ctx, "", 0, 0); return err }, ErrBadSession},
		{"read no sessions", func() error { _, err := j.ReadSessions(ctx, nil, 0, 0); return err }, ErrBadSession},
		{"read too many sessions", func() error { _, err := j.ReadSessions(ctx, many, 0, 0); return err }, ErrTooManySessions},
		{"negative limit", func() error { _, err := j.Read(ctx, s1, 0, -1); return err }, ErrBadLimit},
		{"limit too large", func() error { _, err := j.Read(ctx, s1, 0, MaxReadLimit+1); return err }, ErrBadLimit},
		{"delete empty session", func() error { return j.Delete(ctx, "") }, ErrBadSession},
		{"kept from of empty session", func() error { _, err := j.KeptFrom(ctx, ""); return err }, ErrBadSession},
		{"last seq of long session", func() error { _, err := j.SessionLastSeq(ctx, long); return err }, ErrBadSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if len(err.Error()) > 120 {
				t.Fatalf("error message of %d bytes echoes input: %.120s", len(err.Error()), err)
			}
		})
	}
	// Nothing of the refused batch was kept.
	if got := readOK(t, j, []string{s1}, 0, 0); len(got) != 0 {
		t.Fatalf("a refused batch left %d entries", len(got))
	}

	closeJournal(t, j)
	if _, err := j.Append(ctx, s1, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if _, err := j.LastSeq(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastSeq after Close: %v", err)
	}
}

// Without MaxEntryBytes an entry is bounded by DefaultMaxEntryBytes, past
// the server's maximum payload.
func TestEntryBoundedByDefault(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir()}
	j := h.open(Config{})
	if j.maxEntry != DefaultMaxEntryBytes || int64(j.maxMsg) != j.nc.MaxPayload() {
		t.Fatalf("max entry %d, max message %d; server max payload %d", j.maxEntry, j.maxMsg, j.nc.MaxPayload())
	}
	_, err := j.Append(context.Background(), s1, make([]byte, DefaultMaxEntryBytes+1))
	if !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("entry of DefaultMaxEntryBytes+1: %v", err)
	}
}

func TestOpenRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, Config{}); err == nil {
		t.Fatal("Open with neither Dir nor URL succeeded")
	}
	if _, err := Open(ctx, Config{Dir: t.TempDir(), MaxAge: -1}); err == nil {
		t.Fatal("Open with a negative MaxAge succeeded")
	}
	for _, cfg := range []Config{
		{Stream: "a.b"}, {Stream: "a b"}, {Stream: "a*"}, {Subject: "a.>"}, {Subject: "a..b"},
		{Subject: ".a"}, {Subject: "a b"}, {Stream: strings.Repeat("s", 256)},
	} {
		cfg.Dir = t.TempDir()
		if j, err := Open(ctx, cfg); err == nil {
			closeJournal(t, j)
			t.Errorf("Open with stream %q, subject %q succeeded", cfg.Stream, cfg.Subject)
		}
	}
	h := &harness{t: t, dir: t.TempDir()}
	h.startServer()
	defer h.stopServer()
	for name, cfg := range map[string]Config{
		"no credentials": {URL: h.srv.ClientURL()},
		"wrong password": {URL: h.srv.ClientURL(), User: testUser, Password: "wrong"},
		"token instead":  {URL: h.srv.ClientURL(), Token: "nope"},
	} {
		if j, err := Open(ctx, cfg); err == nil {
			closeJournal(t, j)
			t.Errorf("%s: Open succeeded", name)
		}
	}
}
