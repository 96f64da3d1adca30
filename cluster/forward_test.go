package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster/clustertest"
)

// A request sent by a host on node 0 is answered by a host on node 2, and
// each way it can fail gives its own error.
func TestRequestAcrossNodes(t *testing.T) {
	c := clustertest.Start(t, 3)
	client := join(t, c, 0, "client", true, Config{})
	server := join(t, c, 2, "server", true, Config{MaxMessageBytes: 4096})
	release := make(chan struct{})
	defer close(release)
	err := server.Serve(func(ctx context.Context, req []byte) ([]byte, error) {
		switch {
		case bytes.Equal(req, []byte("fail")):
			return nil, errors.New("no such session")
		case bytes.Equal(req, []byte("big")):
			return make([]byte, 5000), nil
		case bytes.Equal(req, []byte("hang")):
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}
		return append([]byte("echo "), req...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Serve(func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrBadConfig) {
		t.Errorf("second Serve = %v, want ErrBadConfig", err)
	}
	c.WaitInterest(0, client.Subject("server"))

	got, err := client.Request(ctx(t), "server", []byte("hi"))
	if err != nil || string(got) != "echo hi" {
		t.Fatalf("Request = %q, %v", got, err)
	}

	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		host string
		req  []byte
		want error
		text string
	}{
		{"no host serving", ctx(t), "nobody", []byte("x"), ErrNoResponder, "nobody"},
		{"handler fails", ctx(t), "server", []byte("fail"), ErrRemote, "no such session"},
		{"reply over the limit", ctx(t), "server", []byte("big"), ErrRemote, "reply of 5000 bytes"},
		{"no reply in time", short(), "server", []byte("hang"), ErrTimeout, "server"},
		{"bad host id", ctx(t), "a.b", []byte("x"), ErrBadName, ""},
		{"request over the client's limit", ctx(t), "server", make([]byte, DefaultMaxMessageBytes+1), ErrTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Request(tc.ctx, tc.host, tc.req)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Request = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}

	// The server bounds what it accepts: a request over its limit is
	// refused without reaching the handler.
	_, err = client.Request(ctx(t), "server", make([]byte, 4097))
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "request of 4097 bytes") {
		t.Fatalf("request over the server's limit = %v", err)
	}
}

// A closed member stops serving: requests to it find no responder, and
// the handlers it was running end.
func TestCloseStopsServing(t *testing.T) {
	c := clustertest.Start(t, 1)
	client := join(t, c, 0, "client", true, Config{})
	server := join(t, c, 0, "server", true, Config{})
	started := make(chan struct{})
	if err := server.Serve(func(ctx context.Context, req []byte) ([]byte, error) {
		close(started)
		<-ctx.Done() // ends only when the member closes
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	c.WaitInterest(0, client.Subject("server"))
	done := make(chan error, 1)
	go func() {
		_, err := client.Request(ctx(t), "server", []byte("x"))
		done <- err
	}()
	<-started
	if err := server.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrRemote) {
		t.Errorf("the request in flight at Close = %v, want ErrRemote (context canceled)", err)
	}
	if _, err := client.Request(ctx(t), "server", []byte("x")); !errors.Is(err, ErrNoResponder) {
		t.Errorf("Request after Close = %v, want ErrNoResponder", err)
	}
	if err := server.Serve(func(context.Context, []byte) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
}
