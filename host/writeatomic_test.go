package host

import (
	"errors"
	"log/slog"
	"os"
	"syscall"
	"testing"

	"github.com/ahpd/ahpd/host/session"
)

// TestFileStoreSaveFails checks that the file store's save reports a
// failed write, wrapped with the session it was for, and leaves the
// record it had.
func TestFileStoreSaveFails(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	full := false
	st, err := openStore("file", state, slog.New(slog.DiscardHandler), func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		switch {
		case err != nil:
			return nil, err
		case full:
			return fullFile{f}, nil
		}
		return f, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &session.Record{AHPD: session.RecordVersion, URI: "ahp-session:/s1", Title: "one", WorkingDirectories: []string{"/"}}
	if err := st.save("s1", mustEncode(t, rec)); err != nil {
		t.Fatal(err)
	}
	full = true
	rec.Title = "two"
	err = st.save("s1", mustEncode(t, rec))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: %v", err)
	}
	if got := (&session.StoreError{Err: err}).Error(); got != "could not store the session: no space left on device" {
		t.Errorf("a client is told %q", got)
	}
	recs, err := st.load()
	if err != nil || len(recs) != 1 || recs[0].Title != "one" {
		t.Fatalf("after a failed save the store has %+v (%v)", recs, err)
	}
}

func mustEncode(t *testing.T, rec *session.Record) []byte {
	t.Helper()
	data, err := session.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
