//go:build !linux

package main

import "os"

// terminal reports whether f is a character device, which a terminal is
// (and so is /dev/null, which this check takes for one).
func terminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
