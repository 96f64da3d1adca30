// Package lockcheck provides the mutexes of ahpd's session path. Built
// normally they are sync's, at no cost. Built with the lockcheck tag
// (go test -tags lockcheck) each goroutine's held locks are tracked, and a
// lock taken while another is held is recorded as a violation, unless the
// pair of classes was allowed: the proof behind "no function in the
// session path takes more than one lock" (docs/ARCHITECTURE.md). A class
// may also have an owner (Own): a lock of it taken by a function that is
// not the owner's is a violation too.
//
// It owns nothing but that bookkeeping, and must not be used for locks
// outside the host's own state (a library's are its own business).
package lockcheck

import (
	"fmt"
	"os"
)

// Class names a kind of lock in a violation and in Allow. Locks of the same
// class are the same kind (every session's lock is "session").
type Class string

// Violation is a lock taken while another was held, or (Owner set) by a
// function that is not of its class's owner (Own).
type Violation struct {
	Held, Taken Class
	Owner       string // the prefix of the functions that own Taken, for a lock taken outside them
	Stack       string // where the lock was taken
}

func (v Violation) String() string {
	if v.Owner != "" {
		return string(v.Taken) + " taken outside its owner " + v.Owner + "\n" + v.Stack
	}
	return string(v.Taken) + " taken holding " + string(v.Held) + "\n" + v.Stack
}

// Runner is what a TestMain runs: a *testing.M.
type Runner interface{ Run() int }

// Checked wraps a test run so that, built with the lockcheck tag, it fails
// when any test took a tracked lock while holding another, printing each
// violation with where it happened. Use it in TestMain:
//
//	goleak.VerifyTestMain(lockcheck.Checked(m))
func Checked(m Runner) Runner { return checked{m} }

type checked struct{ m Runner }

func (c checked) Run() int {
	code := c.m.Run()
	for _, v := range Violations() {
		fmt.Fprintf(os.Stderr, "lockcheck: %s\n", v)
		code = max(code, 1)
	}
	return code
}
