package catalogue

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A row needs a transcript's first lines and its last ones, never what
// lies between: the reads here take the head forward and the tail
// backward in windows that start small and grow only while the parser
// still wants lines, and later appends are read forward from the offset
// the previous read stopped at.

const (
	// headMax and tailMax bound the windows at each end of a file. The
	// Claude Agent SDK reads the same amounts for its session list.
	headMax = 64 << 10
	tailMax = 64 << 10
	// firstWindow is the first read at each end; most rows are made
	// from it alone.
	firstWindow = 8 << 10
	// chunkSize is the unit of a forward read.
	chunkSize = 64 << 10
	// maxLine is the longest line a forward read holds whole. A longer
	// one (a pasted file, a huge tool result) is passed cut to its first
	// maxLine bytes, which still carry the members a row needs, and the
	// rest of it is only searched for its newline.
	maxLine = 1 << 20
)

// decodeOpts makes decoding lenient about what a writer in another
// language may put in a transcript: lone surrogates, repeated names.
var decodeOpts = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
)

// bufPool holds the windows and chunks reads fill, so a scan of ten
// thousand files allocates a few buffers per worker, not per file.
var bufPool = sync.Pool{New: func() any { return new([tailMax]byte) }}

// fileReader reads one open transcript and counts every byte it reads,
// which is how tests prove a scan read what it had to and no more.
type fileReader struct {
	f    io.ReaderAt
	size int64
	read *atomic.Int64
	// whole holds the file's bytes once the head has read them all, so
	// the tail of a small file costs no second read.
	whole []byte
}

// readAt fills p from off, short only at end of file.
func (r *fileReader) readAt(p []byte, off int64) (int, error) {
	if r.whole != nil && off <= int64(len(r.whole)) {
		return copy(p, r.whole[off:]), nil
	}
	n, err := r.f.ReadAt(p, off)
	r.read.Add(int64(n))
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// head calls fn with the lines of the file's first headMax bytes, in
// order. The last line it passes may be cut by the window; a last line of
// the file without its newline is not passed (the tail reads it). It
// reads firstWindow bytes (a small file whole), passes the lines they
// hold, and reads on in the window only while done says there is more to
// find.
func (r *fileReader) head(buf []byte, done func() bool, fn func(line []byte, cut bool)) error {
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
	if limit <= 2*firstWindow {
		// A small file is read in one go, and the tail reuses it.
		first = limit
	}
	if err := grow(first); err != nil {
		return err
	}
	if int64(n) == r.size {
		r.whole = buf[:n] // the caller clears it before buf is reused
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

// tail calls fn with the lines of the file's last tailMax bytes, last
// first, until fn returns false; unterminated is set for a last line
// without its newline, a line cut short or still being written. A line
// whose start lies before the window is not passed. It reads firstWindow
// bytes, then the rest of the window only if fn still wants lines.
//
// It also returns where the file's last complete line ends (just past
// its newline), which is where a later append is read from, or -1 when
// no newline lies in the window: the file ends inside a line longer than
// the window.
func (r *fileReader) tail(buf []byte, fn func(line []byte, unterminated bool) bool) (lastNL int64, err error) {
	lastNL = -1
	if r.size == 0 {
		return 0, nil
	}
	size := r.size
	l := int(min(int64(firstWindow), size))
	start := len(buf) - l // buf[start:] holds the file from ws on
	ws := size - int64(l)
	m, err := r.readAt(buf[start:], ws)
	if err != nil {
		return -1, err
	}
	if m < l {
		// Shrunk since the stat: drop what was not read.
		copy(buf[len(buf)-m:], buf[start:start+m])
		size, l = ws+int64(m), m
		start = len(buf) - l
	}
	end := len(buf)
	if end > start && buf[end-1] == '\n' {
		lastNL = size
		end--
	}
	done := false
	for !done {
		i := bytes.LastIndexByte(buf[start:end], '\n')
		if i >= 0 {
			ls := start + i + 1
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
		case ws == 0:
			// The file's first line, whole.
			unterminated := lastNL < 0
			if unterminated {
				lastNL = 0
			}
			if line := bytes.TrimSpace(buf[start:end]); len(line) > 0 {
				fn(line, unterminated)
			}
			return lastNL, nil
		case start == 0:
			// The window is full and this line began before it.
			return lastNL, nil
		}
		l2 := int(min(int64(len(buf)), size))
		s2 := len(buf) - l2
		ws2 := size - int64(l2)
		if n, err := r.readAt(buf[s2:start], ws2); err != nil || n < start-s2 {
			// An error, or the file was cut meanwhile: keep what was
			// read whole.
			return lastNL, err
		}
		start, ws = s2, ws2
	}
	return lastNL, nil
}

// forward reads from off to the end of the file and calls fn with each
// complete line, in order. skipping says off lies inside a line whose
// start was dropped (see maxLine): the bytes up to the next newline are
// not a line of their own. A line still being written when the file ends
// is left for the next read, unless it already outgrew maxLine.
//
// It returns where the next read starts and whether that read begins
// inside a dropped line.
func (r *fileReader) forward(off int64, skipping bool, fn func(line []byte, cut bool)) (next int64, skip bool, err error) {
	chunk := bufPool.Get().(*[tailMax]byte)
	defer bufPool.Put(chunk)
	var acc []byte // the line being gathered across chunks
	lineStart, accCut := off, false
	pos := off
	for pos < r.size {
		n, err := r.readAt(chunk[:min(int64(chunkSize), r.size-pos)], pos)
		if err != nil {
			return off, skipping, err
		}
		if n == 0 {
			break
		}
		b := chunk[:n]
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			part := b
			if i >= 0 {
				part = b[:i]
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
			b = b[i+1:]
			lineStart = pos + int64(n-len(b))
			acc, accCut, skipping = acc[:0], false, false
		}
		pos += int64(n)
	}
	switch {
	case skipping:
		return pos, true, nil
	case accCut:
		// An unfinished line already too long to hold: use its head now
		// and drop the rest when it arrives.
		if line := bytes.TrimSpace(acc); len(line) > 0 {
			fn(line, true)
		}
		return pos, true, nil
	}
	return lineStart, false, nil
}

// walkPrefix reads the JSON object at the start of text, which may be cut
// anywhere, and calls fn with each scalar member whose path (names joined
// by "/", such as "turn/startedAt") want accepts, descending only into
// objects whose path descend accepts. It stops quietly where the text
// stops being JSON, which is how a line cut by a window still gives up
// the members written before the cut.
func walkPrefix(text []byte, descend, want func(path string) bool, fn func(path string, tok jsontext.Token)) {
	d := jsontext.NewDecoder(bytes.NewReader(text), decodeOpts)
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return
	}
	var walk func(prefix string) bool
	walk = func(prefix string) bool {
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return false
			}
			path := prefix + name.String()
			switch k := d.PeekKind(); {
			case k == '{' && descend(path):
				if _, err := d.ReadToken(); err != nil || !walk(path+"/") {
					return false
				}
			case k != '{' && k != '[' && want(path):
				tok, err := d.ReadToken()
				if err != nil {
					return false
				}
				fn(path, tok)
			default:
				if d.SkipValue() != nil {
					return false
				}
			}
		}
		_, err := d.ReadToken()
		return err == nil
	}
	walk("")
}
