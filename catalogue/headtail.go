package catalogue

import (
	"bytes"
	"errors"
	"hash/fnv"
	"io"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A row needs a transcript's first lines and its last ones, never what
// lies between: the reads here take the tail backward and the head
// forward in windows that start small and grow only while the parser
// still wants lines, and later appends are read forward from the offset
// the previous read stopped at.

const (
	// headMax and tailMax bound the windows at each end of a file. The
	// Claude Agent SDK's session list reads the same windows, and the
	// rows' titles are what it finds in them.
	headMax = 64 << 10
	tailMax = 64 << 10
	// firstWindow is the first read at each end; many rows are made
	// from it alone.
	firstWindow = 8 << 10
	// chunkSize is the unit of a forward read.
	chunkSize = 64 << 10
	// maxLine is the longest line a forward read holds whole. A longer
	// one (a pasted file, a huge tool result) is passed cut to its first
	// maxLine bytes, which still carry the members a row needs, and the
	// rest of it is only searched for its newline.
	maxLine = 1 << 20
	// markLen is how many bytes before a read's end markAt sums.
	markLen = 64
)

// decodeOpts makes decoding lenient about what a writer in another
// language may put in a transcript: lone surrogates, repeated names.
var decodeOpts = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
)

// bufPool holds the windows a whole read fills (the head's, then the
// tail's with one byte before it), and chunkPool the chunks of forward
// reads, so a scan of ten thousand files allocates a few buffers per
// worker, not per file.
var (
	bufPool   = sync.Pool{New: func() any { return new([headMax + tailMax + 1]byte) }}
	chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}
)

// fileReader reads one open transcript and counts every byte it reads,
// which is how tests prove a scan read what it had to and no more.
type fileReader struct {
	f    io.ReaderAt
	size int64
	read *atomic.Int64
	// cache holds the file's bytes from cacheAt on, as the tail read
	// them, so that the head, where the windows overlap (or a small
	// file's whole), costs no second read.
	cache   []byte
	cacheAt int64
}

// uncache drops the cache before its buffer is reused.
func (r *fileReader) uncache() { r.cache = nil }

// readAt fills p from off, short only at end of file, taking what the
// cache holds from it.
func (r *fileReader) readAt(p []byte, off int64) (int, error) {
	if c := r.cache; c != nil {
		end := r.cacheAt + int64(len(c))
		switch {
		case off >= r.cacheAt && off < end:
			n := copy(p, c[off-r.cacheAt:])
			if n < len(p) && end < r.size {
				m, err := r.readFile(p[n:], end)
				return n + m, err
			}
			return n, nil
		case off < r.cacheAt && off+int64(len(p)) > r.cacheAt:
			k := int(r.cacheAt - off)
			m, err := r.readFile(p[:k], off)
			if err != nil || m < k {
				return m, err
			}
			n, err := r.readAt(p[k:], r.cacheAt)
			return k + n, err
		}
	}
	return r.readFile(p, off)
}

// readFile reads from the file itself and counts what it read.
func (r *fileReader) readFile(p []byte, off int64) (int, error) {
	n, err := r.f.ReadAt(p, off)
	r.read.Add(int64(n))
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// markAt sums the markLen bytes before off (fewer at the file's start).
// A later read from off checks it, to tell a file appended to from one
// rewritten in place: the CLI only appends, but a person may not.
func (r *fileReader) markAt(off int64) (uint64, error) {
	var b [markLen]byte
	from := max(0, off-markLen)
	n, err := r.readAt(b[:off-from], from)
	if err != nil {
		return 0, err
	}
	return markOf(b[:n]), nil
}

// markOf sums b.
func markOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// head calls fn with the lines of the file's first headMax bytes, in
// order. The last line it passes may be cut by the window; a last line of
// the file without its newline is not passed (the tail reads it). It
// reads firstWindow bytes, or all the window when whole says the lines
// wanted lie anywhere in it or the tail's read holds it already, passes
// the lines they hold, and reads on in the window only while done says
// there is more to find.
func (r *fileReader) head(buf []byte, whole bool, done func() bool, fn func(line []byte, cut bool)) error {
	limit := int(min(r.size, int64(len(buf))))
	n := 0
	grow := func(to int) error {
		m, err := r.readAt(buf[n:to], int64(n))
		if m < to-n {
			// The file shrank under us: work with what there is.
			limit = n + m
		}
		n += m
		return err
	}
	first := min(firstWindow, limit)
	if whole || r.cache != nil && r.cacheAt <= int64(first) {
		first = limit // free: it is all in the cache but its first bytes
	}
	if err := grow(first); err != nil {
		return err
	}
	pos := 0
	for {
		if i := bytes.IndexByte(buf[pos:n], '\n'); i >= 0 {
			line := bytes.TrimSpace(buf[pos : pos+i])
			pos += i + 1
			if len(line) > 0 {
				fn(line, false)
			}
			continue
		}
		if done() {
			return nil
		}
		if n < limit {
			if err := grow(limit); err != nil {
				return err
			}
			continue
		}
		// What is left is a line cut by the window, passed as such, or
		// the file's last line without its newline, which is the tail's
		// to judge whole.
		if rest := bytes.TrimSpace(buf[pos:n]); len(rest) > 0 && int64(n) < r.size {
			fn(rest, true)
		}
		return nil
	}
}

// tail calls fn with the lines that start in the file's last tailMax
// bytes, last first, until fn returns false; unterminated is set for a
// last line without its newline, a line cut short or still being
// written. buf holds the window and one byte before it, which tells
// whether the window's first bytes start a line. It reads the last first
// bytes, then the rest of the window only if fn still wants lines, and
// leaves what it read in the reader's cache.
//
// It also returns where the file's last complete line ends (just past
// its newline), which is where a later append is read from, or -1 when
// no newline lies in the window: the file ends inside a line longer than
// the window.
func (r *fileReader) tail(buf []byte, first int, fn func(line []byte, unterminated bool) bool) (lastNL int64, err error) {
	lastNL = -1
	if r.size == 0 {
		return 0, nil
	}
	size := r.size
	l := int(min(int64(min(first, len(buf))), size))
	start := len(buf) - l // buf[start:] holds the file from ws on
	ws := size - int64(l)
	m, err := r.readFile(buf[start:], ws)
	if err != nil {
		return -1, err
	}
	if m < l {
		// Shrunk since the stat: drop what was not read.
		copy(buf[len(buf)-m:], buf[start:start+m])
		size, l = ws+int64(m), m
		start = len(buf) - l
	}
	cached := true
	defer func() {
		if cached {
			r.cache, r.cacheAt = buf[start:], ws
		}
	}()
	end := len(buf)
	if end > start && buf[end-1] == '\n' {
		lastNL = size
		end--
	}
	var found [64]int
	nl := backNL{buf: buf, lo: len(buf), nls: found[:0]}
	done := false
	for !done {
		if i := nl.last(start, end); i >= 0 {
			ls := i + 1
			unterminated := lastNL < 0
			if unterminated {
				lastNL = ws + int64(ls-start)
			}
			if line := bytes.TrimSpace(buf[ls:end]); len(line) > 0 {
				done = !fn(line, unterminated)
			}
			end = ls - 1
			continue
		}
		switch {
		case ws == 0 && size <= int64(len(buf)-1):
			// The file's first line, whole, and in the window.
			unterminated := lastNL < 0
			if unterminated {
				lastNL = 0
			}
			if line := bytes.TrimSpace(buf[start:end]); len(line) > 0 {
				fn(line, unterminated)
			}
			return lastNL, nil
		case start == 0 || ws == 0:
			// The window is full and this line began before it.
			return lastNL, nil
		}
		l2 := int(min(int64(len(buf)), size))
		s2 := len(buf) - l2
		ws2 := size - int64(l2)
		if n, err := r.readFile(buf[s2:start], ws2); err != nil || n < start-s2 {
			// An error, or the file was cut meanwhile: keep what was
			// read whole.
			cached = false
			return lastNL, err
		}
		start, ws = s2, ws2
	}
	return lastNL, nil
}

// backNL finds the newlines of a window from its end backward. Go's
// bytes.LastIndexByte looks at one byte at a time, where IndexByte looks
// at many at once, and a window's lines are mostly a few long ones: so
// the window is searched forward a block at a time, from its end down,
// and each block's newlines are kept and handed out last first.
type backNL struct {
	buf []byte
	lo  int   // buf[lo:] has been searched
	nls []int // the newlines found in it not handed out yet, ascending
}

// nlBlock is how much of a window backNL searches at a time.
const nlBlock = 4 << 10

// last returns the index of the last newline in buf[from:end], or -1.
// Each call's end must not lie above the newline the call before
// returned.
func (b *backNL) last(from, end int) int {
	for {
		for len(b.nls) > 0 && b.nls[len(b.nls)-1] >= end {
			b.nls = b.nls[:len(b.nls)-1]
		}
		if len(b.nls) > 0 {
			if i := b.nls[len(b.nls)-1]; i >= from {
				return i
			}
			return -1
		}
		if b.lo <= from {
			return -1
		}
		lo := max(from, b.lo-nlBlock)
		for i := lo; ; {
			j := bytes.IndexByte(b.buf[i:b.lo], '\n')
			if j < 0 {
				break
			}
			b.nls = append(b.nls, i+j)
			i += j + 1
		}
		b.lo = lo
	}
}

// forward reads from off to the end of the file and calls fn with each
// complete line, in order. skipping says off lies inside a line whose
// start was dropped (see maxLine): the bytes up to the next newline are
// not a line of their own. A line still being written when the file ends
// is left for the next read, unless it already outgrew maxLine.
//
// It first checks, with the same read, that the bytes before off still
// sum to mark (see markAt); when they do not, the file was rewritten
// rather than appended to, and it returns moved without reading on.
//
// It returns where the next read starts, whether that read begins
// inside a dropped line, and the mark there.
func (r *fileReader) forward(off int64, skipping bool, mark uint64, fn func(line []byte, cut bool)) (next int64, skip bool, nextMark uint64, moved bool, err error) {
	chunk := chunkPool.Get().(*[chunkSize]byte)
	defer chunkPool.Put(chunk)
	var acc []byte // the line being gathered across chunks
	lineStart, accCut := off, false
	from := max(0, off-markLen)
	pos := from
	var b []byte // the last chunk read, from pos-len(b)
	for pos < r.size {
		n, err := r.readAt(chunk[:min(int64(chunkSize), r.size-pos)], pos)
		if err != nil {
			return off, skipping, mark, false, err
		}
		b = chunk[:n]
		if pos == from {
			lead := int(off - from)
			if n < lead || markOf(b[:lead]) != mark {
				return off, skipping, mark, true, nil
			}
			b = b[lead:]
		}
		if n == 0 {
			break
		}
		for rest := b; len(rest) > 0; {
			i := bytes.IndexByte(rest, '\n')
			part := rest
			if i >= 0 {
				part = rest[:i]
			}
			if !skipping && !accCut {
				if room := maxLine - len(acc); len(part) > room {
					acc = append(acc, part[:room]...)
					accCut = true
				} else {
					acc = append(acc, part...)
				}
			}
			if i < 0 {
				break
			}
			if !skipping {
				if line := bytes.TrimSpace(acc); len(line) > 0 {
					fn(line, accCut)
				}
			}
			rest = rest[i+1:]
			lineStart = pos + int64(n-len(rest))
			acc, accCut, skipping = acc[:0], false, false
		}
		pos += int64(n)
	}
	next, skip = lineStart, false
	switch {
	case skipping:
		next, skip = pos, true
	case accCut:
		// An unfinished line already too long to hold: use its head now
		// and drop the rest when it arrives.
		if line := bytes.TrimSpace(acc); len(line) > 0 {
			fn(line, true)
		}
		next, skip = pos, true
	}
	// The next mark, from the last chunk when it holds the bytes.
	if next == off {
		return next, skip, mark, false, nil
	}
	lo := max(0, next-markLen)
	if cs := pos - int64(len(b)); lo >= cs && next <= pos {
		return next, skip, markOf(b[lo-cs : next-cs]), false, nil
	}
	nextMark, err = r.markAt(next)
	return next, skip, nextMark, false, err
}
