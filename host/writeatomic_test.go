package host

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"testing"
)

// failingFile is a real temporary file one of whose steps fails.
type failingFile struct {
	*os.File
	step string
}

var errInjected = errors.New("injected failure")

func (f failingFile) Write(p []byte) (int, error) {
	if f.step == "write" {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f failingFile) Sync() error {
	if f.step == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

func (f failingFile) Close() error {
	err := f.File.Close()
	if f.step == "close" {
		return errInjected
	}
	return err
}

// TestFileStoreSaveFails checks that the file store's save reports a
// failed write, wrapped with the session it was for, and leaves the
// record it had.
func TestFileStoreSaveFails(t *testing.T) {
	state := t.TempDir()
	full := false
	st, err := openStore("file", state, slog.New(slog.DiscardHandler), func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		switch {
		case err != nil:
			return nil, err
		case full:
			return failingFile{File: f, step: "write"}, nil
		}
		return f, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &record{AHPD: recordVersion, URI: "ahp-session:/s1", Title: "one", WorkingDirectories: []string{"/"}}
	if err := st.save("s1", mustEncode(t, rec)); err != nil {
		t.Fatal(err)
	}
	full = true
	rec.Title = "two"
	err = st.save("s1", mustEncode(t, rec))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: %v", err)
	}
	if got := (&storeError{err: err}).Error(); got != "could not store the session: no space left on device" {
		t.Errorf("a client is told %q", got)
	}
	recs, err := st.load()
	if err != nil || len(recs) != 1 || recs[0].Title != "one" {
		t.Fatalf("after a failed save the store has %+v (%v)", recs, err)
	}
}

func mustEncode(t *testing.T, rec *record) []byte {
	t.Helper()
	data, err := encodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
