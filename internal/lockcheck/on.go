//go:build lockcheck

package lockcheck

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
)

// Enabled reports whether the tracking is built in.
const Enabled = true

var (
	mu         sync.Mutex
	held       = map[int64][]Class{} // by goroutine
	allowed    = map[[2]Class]bool{}
	violations []Violation
	seen       = map[[2]Class]bool{} // one violation of a pair is enough
)

// Mutex is a sync.Mutex whose holding is tracked.
type Mutex struct {
	m     sync.Mutex
	Class Class
}

func (m *Mutex) Lock() {
	taking(m.Class)
	m.m.Lock()
}

func (m *Mutex) TryLock() bool {
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
	taking(m.Class)
	m.m.Lock()
}

func (m *RWMutex) Unlock() {
	releasing(m.Class)
	m.m.Unlock()
}

func (m *RWMutex) RLock() {
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

// Violations returns the violations recorded so far, and forgets them.
func Violations() []Violation {
	mu.Lock()
	defer mu.Unlock()
	out := violations
	violations = nil
	clear(seen)
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
