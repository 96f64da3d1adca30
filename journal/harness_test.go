package journal

import (
	"cmp"
	"context"
	"net"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ahpd/ahpd/internal/testwait"
)

// harness opens journals either on an embedded server in a store
// directory, or through a URL on a server it starts with a loopback
// listener and a user and password, so that every test proves both paths.
type harness struct {
	t    *testing.T
	url  bool
	dir  string
	srv  *server.Server // the listening server, in URL mode
	port int            // the port it listens on (0: a free one)
}

const (
	testUser     = "ahpd"
	testPassword = "s3cret-pass"
)

// modes runs f once per way of reaching NATS.
func modes(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, url := range []bool{false, true} {
		name := "embedded"
		if url {
			name = "url"
		}
		t.Run(name, func(t *testing.T) {
			h := &harness{t: t, url: url, dir: t.TempDir()}
			if url {
				h.startServer()
				t.Cleanup(h.stopServer)
			}
			f(t, h)
		})
	}
}

// startServer starts a JetStream server on 127.0.0.1 and a free port.
func (h *harness) startServer() {
	h.t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      cmp.Or(h.port, -1),
		JetStream: true,
		StoreDir:  h.dir,
		NoSigs:    true,
		NoLog:     true,
		Username:  testUser,
		Password:  testPassword,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(testwait.Hang) {
		srv.Shutdown()
		h.t.Fatal("NATS server not ready")
	}
	h.srv = srv
	h.port = srv.Addr().(*net.TCPAddr).Port
}

func (h *harness) stopServer() {
	if h.srv != nil {
		h.srv.Shutdown()
		h.srv.WaitForShutdown()
		h.srv = nil
		h.port = 0
	}
}

// restartServer stops the listening server and starts it again on the
// same port and store, so that connected clients reconnect to it.
func (h *harness) restartServer() {
	h.t.Helper()
	port := h.port
	h.stopServer()
	h.port = port
	h.startServer()
}

// open opens a journal with cfg's limits, closed when the test ends.
func (h *harness) open(cfg Config) *Journal {
	h.t.Helper()
	if h.url {
		cfg.URL, cfg.User, cfg.Password = h.srv.ClientURL(), testUser, testPassword
	} else {
		cfg.Dir = h.dir
	}
	j, err := Open(context.Background(), cfg)
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	h.t.Cleanup(func() { closeJournal(h.t, j) })
	return j
}

// restart closes j (and, in URL mode, restarts the server on the same
// store) and opens the journal again.
func (h *harness) restart(j *Journal, cfg Config) *Journal {
	h.t.Helper()
	closeJournal(h.t, j)
	if h.url {
		h.stopServer()
		h.startServer()
	}
	return h.open(cfg)
}

func closeJournal(t testing.TB, j *Journal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	if err := j.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
