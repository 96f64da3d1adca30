package catalogue

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// facts is what one transcript line says about its conversation.
type facts struct {
	// first and last are when the line's work began and ended; the same
	// instant for a Claude line, a turn's start and end for a script one.
	first, last time.Time
	cwd         string
	branch      string
	title       string
	prompt      string
	// conversation marks a line of the conversation itself: a transcript
	// with none (a title alone, a queued operation) is no session yet.
	conversation bool
}

// info is what a transcript's lines, read so far, say about it. It is
// filled from three directions: the head forward, the tail backward and
// appends forward, so each member is either a "first" one (kept from the
// earliest line that has it) or a "latest" one (from the last).
type info struct {
	created      time.Time // first
	cwd          string    // first: the folder the session was started in
	prompt       string    // first
	modified     time.Time // latest
	branch       string    // latest
	title        string    // latest
	conversation bool
}

// forward takes a line that comes after every line seen so far.
func (in *info) forward(f *facts) {
	if in.created.IsZero() {
		in.created = f.first
	}
	if in.cwd == "" {
		in.cwd = f.cwd
	}
	if in.prompt == "" {
		in.prompt = f.prompt
	}
	if !f.last.IsZero() {
		in.modified = f.last
	}
	if f.branch != "" {
		in.branch = f.branch
	}
	if f.title != "" {
		in.title = f.title
	}
	in.conversation = in.conversation || f.conversation
}

// backward takes a line that comes before every line seen so far.
func (in *info) backward(f *facts) {
	if !f.first.IsZero() {
		in.created = f.first
	}
	if f.cwd != "" {
		in.cwd = f.cwd
	}
	if f.prompt != "" {
		in.prompt = f.prompt
	}
	if in.modified.IsZero() {
		in.modified = f.last
	}
	if in.branch == "" {
		in.branch = f.branch
	}
	if in.title == "" {
		in.title = f.title
	}
	in.conversation = in.conversation || f.conversation
}

// join combines what the head (h) and the tail (t) of one file said:
// first members from the head unless it had none, latest members from
// the tail unless it had none.
func join(h, t info) info {
	out := h
	if out.created.IsZero() {
		out.created = t.created
	}
	if out.cwd == "" {
		out.cwd = t.cwd
	}
	if out.prompt == "" {
		out.prompt = t.prompt
	}
	// The head's latest time is only its own end: with none from the
	// tail, the file's modification time (see makeRow) is closer.
	out.modified = t.modified
	if t.branch != "" {
		out.branch = t.branch
	}
	if t.title != "" {
		out.title = t.title
	}
	out.conversation = h.conversation || t.conversation
	return out
}

// lineParser is a provider's reading of its transcript lines.
type lineParser interface {
	// parse reads one line. cut says the line may be incomplete, so
	// only what precedes the cut is read and it is never garbage.
	// wantPrompt says the prompt is still unknown, so a prompt line's
	// message is worth decoding. ok is false for a line that is not the
	// provider's JSON.
	parse(line []byte, cut, wantPrompt bool) (f facts, ok bool)
	// pass reports whether the tail can step over line without decoding
	// it, given what t still lacks: a cheap byte test.
	pass(line []byte, t *info) bool
	// mayTitle reports whether line may carry a title, by the same kind
	// of test.
	mayTitle(line []byte) bool
	// tailDone reports whether the tail has found all it looks for.
	tailDone(t *info) bool
}

// scanResult is what reading a file gave.
type scanResult struct {
	info     info
	next     int64 // where the next forward read starts
	skipping bool  // the next read starts inside a dropped line
	skipped  int   // lines that did not decode
}

// scanWhole makes a file's info from its head and its tail.
func scanWhole(r *fileReader, p lineParser) (scanResult, error) {
	var res scanResult
	hb := bufPool.Get().(*[tailMax]byte)
	defer bufPool.Put(hb)
	defer func() { r.whole = nil }() // it may point into hb
	var h, t info
	headDone := func() bool { return !h.created.IsZero() && h.cwd != "" && h.prompt != "" }
	// Once the head has what it came for it reads no further, but the
	// lines it holds already may still title the session for free.
	err := r.head(hb[:], headDone, func(line []byte, cut bool) {
		if headDone() && !p.mayTitle(line) {
			return
		}
		f, ok := p.parse(line, cut, h.prompt == "")
		if !ok {
			res.skipped++
			return
		}
		h.forward(&f)
	})
	if err != nil {
		return res, err
	}
	tb := bufPool.Get().(*[tailMax]byte)
	defer bufPool.Put(tb)
	last, err := r.tail(tb[:], func(line []byte, unterminated bool) bool {
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
	res.info = join(h, t)
	if last < 0 {
		res.next, res.skipping = r.size, true
	} else {
		res.next = last
	}
	return res, nil
}

// scanAppended brings in up to date with the lines after off.
func scanAppended(r *fileReader, p lineParser, in info, off int64, skipping bool) (scanResult, error) {
	res := scanResult{info: in}
	next, skip, err := r.forward(off, skipping, func(line []byte, cut bool) {
		f, ok := p.parse(line, cut, res.info.prompt == "")
		if !ok {
			res.skipped++
			return
		}
		res.info.forward(&f)
	})
	res.next, res.skipping = next, skip
	return res, err
}

// fileState is the catalogue's record of one transcript file. The loop
// goroutine owns it; workers get copies.
type fileState struct {
	path   string
	key    Key
	parser lineParser

	// What the file was when last read. stat is kept to tell a file
	// replaced under the same name (a new inode) from one appended to.
	stat     fs.FileInfo
	size     int64
	mtime    time.Time
	offset   int64
	skipping bool
	info     info
	read     bool // a read succeeded at least once

	// err is the last read's failure; logged when it first appears.
	err error

	row *Row // nil while the transcript holds no conversation
}

// errGone reports a file that is no longer there to read.
var errGone = errors.New("transcript is gone")

// refresh reads what changed in the file since st was recorded and
// returns the new record, reading appended bytes only when the file grew
// in place, and the head and the tail otherwise. It returns errGone when
// the file no longer exists. It is safe to call from any goroutine: it
// touches nothing but its copy.
func refresh(st fileState, counter *atomic.Int64, skipped *atomic.Int64) (fileState, error) {
	// Only regular files: opening a FIFO that an event named would
	// block until something wrote to it.
	if fi, err := os.Lstat(st.path); err != nil || !fi.Mode().IsRegular() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return st, errGone
		}
		return st, err
	}
	f, err := os.Open(st.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return st, errGone
		}
		return st, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, err
	}
	if !fi.Mode().IsRegular() {
		return st, errGone
	}
	size := fi.Size()
	if st.read && st.err == nil && st.stat != nil && os.SameFile(st.stat, fi) &&
		size == st.size && fi.ModTime().Equal(st.mtime) {
		return st, nil // nothing new
	}
	r := &fileReader{f: f, size: size, read: counter}
	var res scanResult
	if st.read && st.stat != nil && os.SameFile(st.stat, fi) && size >= st.size && size >= st.offset {
		res, err = scanAppended(r, st.parser, st.info, st.offset, st.skipping)
	} else {
		res, err = scanWhole(r, st.parser)
	}
	skipped.Add(int64(res.skipped))
	if err != nil {
		return st, err
	}
	st.stat, st.size, st.mtime = fi, size, fi.ModTime()
	st.offset, st.skipping, st.info = res.next, res.skipping, res.info
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
