package acp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// maxLine is the longest line ahpd reads from an agent's stdout, newline
// included. The SDK reads at most 10 MiB; a line ahpd hands it must fit.
const maxLine = 8 << 20

// errLineTooLong is the end of the connection to an agent that wrote a
// line longer than maxLine.
var errLineTooLong = fmt.Errorf("it wrote a line of more than %d MiB on its stdout, more than ahpd reads as one ACP message", maxLine>>20)

// stdoutReader reads the agent's stdout ahead of the SDK, line by line.
// It takes the session/update notifications out of the stream and posts
// them to the client's mailbox itself; every other line it passes on to
// the SDK as it came.
//
// The SDK hands notifications to their handler one at a time from a
// queue of 1,024 that it closes the connection over when it fills, and
// its handler goroutine decodes each update, which is slower than its
// reader: on a busy machine, an agent streaming 5,000 chunks a second
// overran it. Read
// here, an update costs the SDK nothing, and a mailbox that is full
// makes Read wait, so a fast agent is slowed by its full pipe rather
// than cut off.
//
// Order holds: an update is posted before any line after it is passed
// on, so a response or a request the SDK reads later finds the updates
// sent before it in the mailbox (see client.setSink and turnRun.flush).
type stdoutReader struct {
	br     *bufio.Reader
	notify func(params json.RawMessage) // a session/update's params, in order

	pending []byte // what the SDK has still to read of the line passed on
	err     error  // how reading ended; pending goes first

	mu     sync.Mutex
	failed error // err, for others to read, once it is not io.EOF
}

func newStdoutReader(r io.Reader, notify func(json.RawMessage)) *stdoutReader {
	return &stdoutReader{br: bufio.NewReaderSize(r, 64<<10), notify: notify}
}

// Read gives the SDK the next lines that are not session updates. Only
// the SDK's reading goroutine calls it.
func (r *stdoutReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.readLine()
		if err != nil {
			r.fail(err)
		}
		if len(line) > 0 {
			if params, ok := sessionUpdate(line); ok {
				r.notify(params)
			} else {
				r.pending = line
			}
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *stdoutReader) fail(err error) {
	r.err = err
	if err != io.EOF {
		r.mu.Lock()
		r.failed = err
		r.mu.Unlock()
	}
}

// failure returns the error reading ended with, if it was not the end of
// the agent's output.
func (r *stdoutReader) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// readLine reads one line, its newline included, into memory of its own.
func (r *stdoutReader) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(line)+len(frag) > maxLine {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// envelope is what tells a JSON-RPC message's kind, read as the SDK reads
// it: a message with a method and no id (a null id is none) is a
// notification.
type envelope struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Params json.RawMessage  `json:"params"`
}

// sessionUpdate returns the params of line when it is a session/update
// notification.
func sessionUpdate(line []byte) (json.RawMessage, bool) {
	var env envelope
	if json.Unmarshal(line, &env) != nil || env.ID != nil || env.Method != sdk.ClientMethodSessionUpdate {
		return nil, false
	}
	return env.Params, true
}
