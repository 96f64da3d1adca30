//go:build !lockcheck

package lockcheck

import "sync"

// Enabled reports whether the tracking is built in.
const Enabled = false

// Mutex is a sync.Mutex with a class, for the lockcheck build.
type Mutex struct {
	sync.Mutex
	Class Class
}

// RWMutex is a sync.RWMutex with a class, for the lockcheck build.
type RWMutex struct {
	sync.RWMutex
	Class Class
}

// Allow lets a lock of class inner be taken holding one of class outer.
func Allow(outer, inner Class) {}

// Own says that locks of class are taken only by the functions whose full
// name starts with one of prefixes.
func Own(class Class, prefixes ...string) {}

// Violations returns the violations recorded so far, and forgets them.
func Violations() []Violation { return nil }
