package host

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// TestWriteAtomicLeavesNothingOnFailure checks that a write that fails at
// any step leaves the old file whole and no temporary file beside it. The
// rename is made to fail for real: the path is a directory that is not
// empty.
func TestWriteAtomicLeavesNothingOnFailure(t *testing.T) {
	for _, step := range []string{"write", "sync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s1.json")
			old := []byte(`{"old":true}`)
			if step == "rename" {
				if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
			create := func(dir, pattern string) (tempFile, error) {
				f, err := os.CreateTemp(dir, pattern)
				if err != nil {
					return nil, err
				}
				return failingFile{File: f, step: step}, nil
			}
			if err := writeAtomic(create, path, []byte(`{"new":true}`)); err == nil {
				t.Fatal("the write did not fail")
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"s1.json"}) {
				t.Errorf("the folder holds %v, want s1.json alone", names)
			}
			if step != "rename" {
				if data, _ := os.ReadFile(path); string(data) != string(old) {
					t.Errorf("the old file became %q", data)
				}
			}
		})
	}
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
