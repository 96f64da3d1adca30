//go:build !linux

package corpus

import "errors"

// Evict is only done on Linux.
func Evict(paths []string) error { return errors.New("corpus: evicting cached pages needs Linux") }
