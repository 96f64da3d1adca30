package protocol

import (
	"sync"
	"unsafe"
)

// textBuf is the byte array that the successive values of an appendable
// text member (a markdown or reasoning part's content) are views of. A
// reply streamed in many deltas is appended to in place, so each delta
// costs its own length, not the length of the reply so far.
//
// States are immutable: every earlier value is a string over the bytes
// before its length, which later appends never touch. Only the newest
// value, the one that ends where the buffer does, is appended to in place;
// appending to an older one (a state reduced twice) copies.
type textBuf struct {
	mu sync.Mutex // appends to one buffer from two states must not interleave
	b  []byte
}

// appendText returns s+delta and the buffer it is a view of.
func appendText(s string, buf *textBuf, delta string) (string, *textBuf) {
	if delta == "" {
		return s, buf
	}
	if buf != nil && len(s) > 0 {
		buf.mu.Lock()
		if len(buf.b) == len(s) && unsafe.StringData(s) == unsafe.SliceData(buf.b) {
			buf.b = append(buf.b, delta...)
			out := unsafe.String(unsafe.SliceData(buf.b), len(buf.b))
			buf.mu.Unlock()
			return out, buf
		}
		buf.mu.Unlock()
	}
	nb := &textBuf{b: make([]byte, 0, max(2*(len(s)+len(delta)), 256))}
	nb.b = append(append(nb.b, s...), delta...)
	return unsafe.String(unsafe.SliceData(nb.b), len(nb.b)), nb
}
