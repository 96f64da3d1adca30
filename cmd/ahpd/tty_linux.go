package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminal reports whether f is a terminal: a device that answers the
// terminal ioctl, which /dev/null, also a character device, does not. It
// goes through SyscallConn rather than Fd, which would put the file in
// blocking mode for good (and every later write to it on a thread of its
// own).
func terminal(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		_, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS)
	}); err != nil {
		return false
	}
	return ierr == nil
}
