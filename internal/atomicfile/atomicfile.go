// Package atomicfile writes whole files so that a crash, a full disk or a
// failed step leaves the old file or the new one, never half of either,
// and nothing beside them.
//
// It owns only the write: a temporary file in the same folder (named so
// that IsTemp knows it), written, synced, renamed over the old file, and
// the folder synced so that the rename outlives a crash. What the file
// holds, and who may write it when, is the caller's.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is the temporary file a write goes through: an *os.File, or one a
// test makes fail.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// CreateTemp makes a temporary file in dir, as os.CreateTemp does.
type CreateTemp func(dir, pattern string) (File, error)

// Options are a write's; nil options are valid.
type Options struct {
	// Perm is the new file's mode; 0 is 0600.
	Perm fs.FileMode
	// CreateTemp makes the temporary file; nil is os.CreateTemp. For
	// tests of what a failing disk does.
	CreateTemp CreateTemp
}

// tempPrefix begins the name of every temporary file this package makes.
const tempPrefix = ".tmp-"

// IsTemp says whether name (a file name, not a path) is one of this
// package's temporary files: one a write that never finished left, which
// the folder's owner may remove when it opens the folder, since the file
// it was to replace is still whole.
func IsTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// SyncDirError is the error of a write whose rename was done but whose
// folder could not be synced: the new file is in place, though a crash
// may still take the rename back.
type SyncDirError struct{ Err error }

func (e *SyncDirError) Error() string { return "syncing the folder: " + e.Err.Error() }
func (e *SyncDirError) Unwrap() error { return e.Err }

// Write writes data to path. On any error but a *SyncDirError, path is as
// it was and the temporary file is gone. Its errors are the system's (which
// name the file); the caller says what the file was for.
func Write(path string, data []byte, opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	create, perm := opts.CreateTemp, opts.Perm
	if create == nil {
		create = osCreateTemp
	}
	if perm == 0 {
		perm = 0o600
	}
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	tmp, err := create(dir, tempPrefix+name+"-*")
	if err != nil {
		return err
	}
	err = fill(tmp, data, perm)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		if rerr := os.Remove(tmp.Name()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing the temporary file: %w", rerr))
		}
		return err
	}
	if err := SyncDir(dir); err != nil {
		return &SyncDirError{Err: err}
	}
	return nil
}

// fill writes data to the temporary file, sets its mode and syncs it.
func fill(tmp File, data []byte, perm fs.FileMode) error {
	if f, ok := tmp.(interface{ Chmod(fs.FileMode) error }); ok {
		if err := f.Chmod(perm); err != nil {
			return err
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	return tmp.Sync()
}

// SyncDir syncs a folder, so that the files created, renamed or removed
// in it stay so after a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func osCreateTemp(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }
