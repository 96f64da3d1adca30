// Package fulldisk runs a test on a small file system of its own that the
// test can fill to the last byte: a tmpfs mounted in a mount namespace of
// the test's own (with a user namespace, so that it needs no root), which
// nothing outside the test sees and which goes with it. It is for tests
// only; it must not be imported by anything else.
//
// A test calls Run first. In the test's own process Run starts the test
// binary again, for that test alone, inside the namespaces, reports what
// it did, and returns false: the test returns. In that child Run returns
// true, and the test goes on to Mount, fill and check.
package fulldisk

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv, set, says the process is the child Run started.
const childEnv = "AHPD_FULLDISK_CHILD"

// Run reports whether t runs in the child, where it may Mount. In the
// test's own process it runs t again in the child, fails t with the
// child's output when the child fails, logs the child's lines of the
// test's files (logged, one per file), and returns false. Where no mount
// namespace can be made (not root, and no user namespaces) it skips t.
func Run(t *testing.T, logged ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	attrs := []*syscall.SysProcAttr{{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}}
	if os.Geteuid() == 0 {
		attrs = append(attrs, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS})
	}
	var startErr error
	for _, attr := range attrs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=7m")
		cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
		cmd.SysProcAttr = attr
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if startErr = cmd.Start(); startErr != nil {
			continue // namespaces this machine does not allow
		}
		err := cmd.Wait()
		if err != nil || !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
			t.Fatalf("%s failed on its file system (%v):\n%s", t.Name(), err, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			for _, file := range logged {
				if strings.Contains(line, file) {
					t.Log(strings.TrimSpace(line))
				}
			}
		}
		return false
	}
	t.Skipf("no mount namespace can be made here (%v): a full-disk test needs root, or user namespaces", startErr)
	return false
}

// Mount mounts a tmpfs of size bytes on a temporary directory, and
// unmounts it when the test ends. Only in Run's child.
func Mount(t *testing.T, size int) string {
	t.Helper()
	// Nothing mounted here may reach the parent's namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making mounts private: %v", err)
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		err := syscall.Unmount(dir, 0)
		if errors.Is(err, syscall.EBUSY) {
			// A file still open in it (nats-server 2.15.2 keeps the block
			// file of a stream it failed to make): detached now, the
			// tmpfs goes when this process does.
			err = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if err != nil {
			t.Errorf("unmounting the tmpfs: %v", err)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system has no room left, not a
// byte, and returns a function that removes it (called at the test's end
// too).
func Fill(t *testing.T, dir string) (remove func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	// Single bytes too, so that not a page is left.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	f.Close()
	removed := false
	remove = func() {
		if !removed {
			removed = true
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(remove)
	return remove
}
