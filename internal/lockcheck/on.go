//go:build lockcheck

package lockcheck

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Enabled reports whether the tracking is built in.
const Enabled = true

var (
	mu         sync.Mutex
	held       = map[int64][]Class{} // by goroutine
	allowed    = map[[2]Class]bool{}
	violations []Violation
	seen       = map[[2]Class]bool{}  // one violation of a pair is enough
	owners     = map[Class][]string{} // by class: the prefixes of the functions that may take it
	outsiders  = map[string]bool{}    // the functions seen taking a lock they do not own
)

// Mutex is a sync.Mutex whose holding is tracked.
type Mutex struct {
	m     sync.Mutex
	Class Class
}

func (m *Mutex) Lock() {
	owning(m.Class)
	taking(m.Class)
	m.m.Lock()
}

func (m *Mutex) TryLock() bool {
	owning(m.Class)
	if !m.m.TryLock() {
		return false
	}
	taking(m.Class)
	return true
}

func (m *Mutex) Unlock() {
	releasing(m.Class)
	m.m.Unlock()
}

// RWMutex is a sync.RWMutex whose holding is tracked; a read lock counts
// as holding it.
type RWMutex struct {
	m     sync.RWMutex
	Class Class
}

func (m *RWMutex) Lock() {
	owning(m.Class)
	taking(m.Class)
	m.m.Lock()
}

func (m *RWMutex) Unlock() {
	releasing(m.Class)
	m.m.Unlock()
}

func (m *RWMutex) RLock() {
	owning(m.Class)
	taking(m.Class)
	m.m.RLock()
}

func (m *RWMutex) RUnlock() {
	releasing(m.Class)
	m.m.RUnlock()
}

// Allow lets a lock of class inner be taken holding one of class outer.
func Allow(outer, inner Class) {
	mu.Lock()
	defer mu.Unlock()
	allowed[[2]Class{outer, inner}] = true
}

// Own says that locks of class are taken only by the functions whose full
// name (runtime.Func.Name, such as "example.com/pkg.(*T).m" or a closure
// in it, "example.com/pkg.(*T).m.func1") starts with one of prefixes: a
// lock of class taken elsewhere is a violation.
func Own(class Class, prefixes ...string) {
	mu.Lock()
	defer mu.Unlock()
	owners[class] = prefixes
}

// owning records a violation when the function taking a lock of class is
// not of its owner's.
func owning(c Class) {
	mu.Lock()
	prefixes, owned := owners[c]
	mu.Unlock()
	if !owned {
		return
	}
	var pcs [8]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, thisPackage) {
			for _, p := range prefixes {
				if strings.HasPrefix(f.Function, p) {
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !outsiders[f.Function] {
				outsiders[f.Function] = true
				buf := make([]byte, 8<<10)
				buf = buf[:runtime.Stack(buf, false)]
				violations = append(violations, Violation{Taken: c, Owner: strings.Join(prefixes, " or "), Stack: string(buf)})
			}
			return
		}
		if !more {
			return
		}
	}
}

// thisPackage is the prefix of this package's functions, which take locks
// for their callers.
const thisPackage = "github.com/ahpd/ahpd/internal/lockcheck."

// Violations returns the violations recorded so far, and forgets them.
func Violations() []Violation {
	mu.Lock()
	defer mu.Unlock()
	out := violations
	violations = nil
	clear(seen)
	clear(outsiders)
	return out
}

func taking(c Class) {
	g := goid()
	mu.Lock()
	defer mu.Unlock()
	for _, h := range held[g] {
		pair := [2]Class{h, c}
		if allowed[pair] || seen[pair] {
			continue
		}
		seen[pair] = true
		buf := make([]byte, 8<<10)
		buf = buf[:runtime.Stack(buf, false)]
		violations = append(violations, Violation{Held: h, Taken: c, Stack: string(buf)})
	}
	held[g] = append(held[g], c)
}

func releasing(c Class) {
	g := goid()
	mu.Lock()
	defer mu.Unlock()
	list := held[g]
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	// A lock let go by another goroutine than took it (legal for a
	// sync.Mutex) leaves its taker's entry: drop it there.
	if len(list) == len(held[g]) {
		for other, l := range held {
			for i := len(l) - 1; i >= 0; i-- {
				if l[i] == c {
					held[other] = append(l[:i], l[i+1:]...)
					return
				}
			}
		}
	}
	if len(list) == 0 {
		delete(held, g)
	} else {
		held[g] = list
	}
}

// goid returns the calling goroutine's id, read from its stack header.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}
