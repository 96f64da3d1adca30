package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminal reports whether f is a terminal: a device that answers the
// terminal ioctl, which /dev/null, also a character device, does not.
func terminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
