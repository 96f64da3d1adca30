package host

import (
	"bufio"
	"io"

	"github.com/ahpd/ahpd/grants"

	"github.com/ahpd/ahpd/internal/lockcheck"
)

// Connect opens a connection to the host from inside the process, acting
// for cred as a WebSocket that presented its token would: every grant and
// root is checked the same, and a revoked token cuts it. It speaks
// JSON-RPC a message a line (client.Open speaks it). Closing the returned
// stream ends the connection and waits until the host is done with it.
// Automation runs and the HTTP API reach the host this way.
func (h *Host) Connect(cred grants.Credential) (io.ReadWriteCloser, error) {
	return h.connect(cred, "")
}

// connect is Connect for a connection standing for one of another host's
// (from: that host's id) or, with from "", for one of this host's own.
func (h *Host) connect(cred grants.Credential, from string) (io.ReadWriteCloser, error) {
	toHostR, toHostW := io.Pipe()
	fromHostR, fromHostW := io.Pipe()
	t := &stdioTransport{mu: lockcheck.Mutex{Class: "transport"}, r: bufio.NewReaderSize(toHostR, 64<<10), w: fromHostW, limit: h.opts.Limits.MessageBytes}
	c, err := h.admit(t, true, cred)
	if err != nil {
		return nil, err
	}
	c.forwardedFrom = from
	go h.serve(c)
	return &selfStream{Reader: fromHostR, w: toHostW, r: fromHostR, done: c.done}, nil
}

// selfStream is the far end of a connection the host serves to itself:
// a pair of pipes.
type selfStream struct {
	io.Reader                // from the host
	w         *io.PipeWriter // to the host
	r         *io.PipeReader
	done      <-chan struct{}
}

func (s *selfStream) Write(p []byte) (int, error) { return s.w.Write(p) }

func (s *selfStream) Close() error {
	_ = s.w.Close()
	_ = s.r.Close()
	<-s.done
	return nil
}
