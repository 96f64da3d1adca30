package atomicfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/ahpd/ahpd/internal/atomicfile"
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

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestWriteLeavesNothingOnFailure checks that a write that fails at any
// step leaves the old file whole and no temporary file beside it. The
// rename is made to fail for real: the path is a folder that is not empty.
func TestWriteLeavesNothingOnFailure(t *testing.T) {
	for _, step := range []string{"create", "write", "sync", "close", "rename"} {
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
			create := func(dir, pattern string) (atomicfile.File, error) {
				if step == "create" {
					return nil, &fs.PathError{Op: "open", Path: dir, Err: syscall.ENOSPC}
				}
				f, err := os.CreateTemp(dir, pattern)
				if err != nil {
					return nil, err
				}
				return failingFile{File: f, step: step}, nil
			}
			err := atomicfile.Write(path, []byte(`{"new":true}`), &atomicfile.Options{CreateTemp: create})
			if err == nil {
				t.Fatal("the write did not fail")
			}
			var sde *atomicfile.SyncDirError
			if errors.As(err, &sde) {
				t.Fatalf("a failure before the rename is told as one after it: %v", err)
			}
			if got := names(t, dir); !slices.Equal(got, []string{"s1.json"}) {
				t.Errorf("the folder holds %v, want s1.json alone", got)
			}
			if step != "rename" {
				if data, _ := os.ReadFile(path); string(data) != string(old) {
					t.Errorf("the old file became %q", data)
				}
			}
		})
	}
}

// TestWrite checks a write that works: the new contents in place, with
// the mode asked for (0600 when none is), and nothing beside it.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *atomicfile.Options
		want fs.FileMode
	}{
		{"nil options", nil, 0o600},
		{"a mode", &atomicfile.Options{Perm: 0o640}, 0o640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := atomicfile.Write(path, []byte("new"), tc.opts); err != nil {
				t.Fatal(err)
			}
			if data, _ := os.ReadFile(path); string(data) != "new" {
				t.Errorf("the file holds %q", data)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.want)
			}
			if got := names(t, dir); !slices.Equal(got, []string{"f"}) {
				t.Errorf("the folder holds %v", got)
			}
		})
	}
}

// TestIsTemp checks that the temporary files a write makes are the ones
// IsTemp names, and a folder owner's own files are not.
func TestIsTemp(t *testing.T) {
	dir := t.TempDir()
	var seen string
	create := func(dir, pattern string) (atomicfile.File, error) {
		f, err := os.CreateTemp(dir, pattern)
		if err == nil {
			seen = filepath.Base(f.Name())
		}
		return f, err
	}
	if err := atomicfile.Write(filepath.Join(dir, "rec.json"), []byte("{}"), &atomicfile.Options{CreateTemp: create}); err != nil {
		t.Fatal(err)
	}
	if !atomicfile.IsTemp(seen) {
		t.Errorf("IsTemp(%q) = false for the write's own temporary file", seen)
	}
	for _, name := range []string{"rec.json", "tmp-rec.json", ".rec.json"} {
		if atomicfile.IsTemp(name) {
			t.Errorf("IsTemp(%q) = true", name)
		}
	}
}
