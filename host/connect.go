package host

import (
	"io"
	"time"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
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
	c, err := h.admit(conn.Lines(toHostR, fromHostW, h.opts.Limits.MessageBytes), true, cred, from)
	if err != nil {
		return nil, err
	}
	c.Start(h.dispatch)
	return &selfStream{Reader: fromHostR, w: toHostW, r: fromHostR, done: c.Done()}, nil
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

// finishTime is how long shutdown waits for connections to answer what
// they took and write their last words before it cuts them.
const finishTime = 3 * time.Second

// endConnections finishes every connection: none takes a request more,
// those taken are answered and what is queued is written. One not done in
// finishTime is cut.
func (h *Host) endConnections() {
	conns := h.connList()
	for _, c := range conns {
		c.DrainInput("ahpd is shutting down")
	}
	late := time.NewTimer(finishTime)
	defer late.Stop()
	for _, c := range conns {
		select {
		case <-c.Done():
		case <-late.C:
			late.Reset(0)
			h.metrics.cutFor(conn.CutShutdown)
			c.Cut(conn.ClosePolicy, "ahpd is shutting down")
		}
	}
}
