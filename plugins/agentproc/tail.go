package agentproc

import (
	"io"
	"strings"
	"sync"
)

// Tail keeps the last bytes written to it: a child's stderr for an
// error message, or a command's output. It is safe for concurrent use.
type Tail struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
}

// NewTail returns a Tail that keeps the last limit bytes.
func NewTail(limit int) *Tail {
	return &Tail{limit: max(limit, 0)}
}

// Write keeps b, dropping the oldest bytes beyond the limit. It never
// fails.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	// Trimming only past twice the limit keeps the copying linear.
	if len(t.buf) > 2*t.limit+4096 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
		t.truncated = true
	}
	return len(b), nil
}

// Last returns at most the last n bytes written (and kept), starting on
// a UTF-8 character boundary.
func (t *Tail) Last(n int) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, _ := t.last(n)
	return out
}

// Output returns what the limit keeps, starting on a UTF-8 character
// boundary, and whether anything was dropped.
func (t *Tail) Output() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last(t.limit)
}

// String returns what the limit keeps as valid UTF-8: bytes that are not
// part of a character are dropped, wherever they are.
func (t *Tail) String() string {
	out, _ := t.Output()
	return strings.ToValidUTF8(string(out), "")
}

func (t *Tail) last(n int) ([]byte, bool) {
	b := t.buf
	cut := t.truncated
	if len(b) > n {
		b = b[len(b)-max(n, 0):]
		cut = true
		// Skip continuation bytes of a character cut in two.
		for len(b) > 0 && b[0]&0xC0 == 0x80 {
			b = b[1:]
		}
	}
	return append([]byte(nil), b...), cut
}

var _ io.Writer = (*Tail)(nil)
