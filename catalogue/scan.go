package catalogue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"unicode/utf8"
)

// scanResult is what reading a file gave.
type scanResult struct {
	info     info
	next     int64  // where the next forward read starts
	skipping bool   // the next read starts inside a dropped line
	mark     uint64 // markAt(next)
	skipped  int    // lines that did not decode
}

// scanWhole makes a file's info from its tail window, then its head
// window: the tail first, because a custom title found there settles the
// title, and the head need then be read only to its first prompt.
func scanWhole(r *fileReader, p *format) (scanResult, error) {
	var res scanResult
	buf := bufPool.Get().(*[headMax + tailMax + 1]byte)
	defer bufPool.Put(buf)
	defer r.uncache() // it points into buf

	var h, t info
	last, err := r.tail(buf[headMax:], p.tailFirst(), func(line []byte, unterminated bool) bool {
		// A last line without its newline is always tried: cut short,
		// it is counted; whole, it is the newest line there is.
		if !unterminated && p.pass(line, &t) {
			return true
		}
		f, ok := p.parse(line, false, t.prompt == "")
		if !ok {
			res.skipped++
			return true
		}
		t.backward(&f)
		return !p.tailDone(&t)
	})
	if err != nil {
		return res, err
	}
	headDone := func() bool { return p.headDone(&h, &t) }
	err = r.head(buf[:headMax], p.headWhole(&t), headDone, func(line []byte, cut bool) {
		// Once the head has its first lines' facts, only titles are
		// left to find in it.
		if p.headBasics(&h, &t) && !p.mayTitle(line) {
			return
		}
		f, ok := p.parse(line, cut, h.prompt == "")
		if !ok {
			res.skipped++
			return
		}
		h.headLine(&f)
	})
	if err != nil {
		return res, err
	}
	res.info = join(h, t)
	if last < 0 {
		res.next, res.skipping = r.size, true
	} else {
		res.next = last
	}
	res.mark, err = r.markAt(res.next)
	return res, err
}

// scanAppended brings in up to date with the lines after off, after
// checking that the bytes before off are still those it read (mark): a
// file rewritten in place rather than appended to is read whole again.
func scanAppended(r *fileReader, p *format, in info, off int64, skipping bool, mark uint64) (scanResult, error) {
	res := scanResult{info: in}
	next, skip, nextMark, moved, err := r.forward(off, skipping, mark, func(line []byte, cut bool) {
		f, ok := p.parse(line, cut, res.info.prompt == "")
		if !ok {
			res.skipped++
			return
		}
		res.info.forward(&f)
	})
	if err != nil {
		return res, err
	}
	if moved {
		return scanWhole(r, p)
	}
	res.next, res.skipping, res.mark = next, skip, nextMark
	return res, nil
}

// fileState is the catalogue's record of one transcript file. The loop
// goroutine owns it; workers get copies.
type fileState struct {
	path   string
	key    Key
	parser *format

	// What the file was when last read: id tells a file replaced under
	// the same name (a new inode) from one appended to, and one
	// unchanged from one written since (see fileID).
	id       fileID
	offset   int64
	skipping bool
	mark     uint64 // markAt(offset) when read
	info     info
	read     bool // a read succeeded at least once
	// listed is the modification time the last listing's stat gave,
	// which orders the reads newest first (see readAll).
	listed int64

	// err is the last read's failure; logged when it first appears.
	err error

	row *Row // nil while the transcript holds no conversation
}

// unchanged reports whether a file whose stat gives id needs no read.
func (st *fileState) unchanged(id fileID) bool {
	return st.read && st.err == nil && st.id == id
}

// errGone reports a file that is no longer there to read.
var errGone = errors.New("transcript is gone")

// refresh reads what changed in the file since st was recorded and
// returns the new record, reading appended bytes only when the file grew
// in place, and the head and the tail otherwise. It returns errGone when
// the file no longer exists. It is safe to call from any goroutine: it
// touches nothing but its copy.
func refresh(st fileState, counter *atomic.Int64, skipped *atomic.Int64) (fileState, error) {
	// Only regular files, and not through a symbolic link: openFlags
	// makes opening a FIFO that an event named return at once instead of
	// waiting for a writer, and opening a link fail.
	f, err := os.OpenFile(st.path, openFlags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isLink(err) {
			return st, errGone
		}
		return st, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, fmt.Errorf("stat: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return st, errGone
	}
	id := idOf(fi)
	if st.unchanged(id) {
		return st, nil // nothing new
	}
	// The reads below take a few pages at each end of a large file,
	// where the kernel would read ahead megabytes it will not be asked
	// for. A small one is read whole in one read.
	if id.size > tailMax+1 {
		adviseRandom(f)
	}
	r := &fileReader{f: f, size: id.size, read: counter}
	var res scanResult
	// Only a file that grew was appended to; one written without growing
	// was rewritten, and is read whole.
	if st.read && id.sameFile(st.id) && id.size > st.id.size && id.size >= st.offset {
		res, err = scanAppended(r, st.parser, st.info, st.offset, st.skipping, st.mark)
	} else {
		res, err = scanWhole(r, st.parser)
	}
	skipped.Add(int64(res.skipped))
	if err != nil {
		return st, err
	}
	st.id = id
	st.offset, st.skipping, st.mark, st.info = res.next, res.skipping, res.mark, res.info
	st.read, st.err = true, nil
	return st, nil
}

// maxPrompt bounds the first prompt a row keeps: it is a fallback title,
// and a row must not hold a pasted file.
const maxPrompt = 256

// clip collapses runs of white space in s to one space and cuts the
// result to maxPrompt bytes at a rune boundary. It reads no further than
// it keeps, so a long prompt costs no more than a short one, and the
// result is a copy that does not pin s.
func clip(s string) string {
	var b []byte
	space := false
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0:
			space = len(b) > 0
			continue
		}
		if space {
			if len(b)+1 >= maxPrompt {
				break
			}
			b = append(b, ' ')
			space = false
		}
		if len(b)+utf8.RuneLen(r) > maxPrompt {
			break
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}
