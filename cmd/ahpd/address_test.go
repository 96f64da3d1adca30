package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ahpd/ahpd/client"
)

// TestAddressFile: a daemon records where it listens for local clients
// while it runs, and takes the record away when it exits.
func TestAddressFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := serveDaemon(t, e)
	path := filepath.Join(e.state, client.AddressFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no address file while serving: %v", err)
	}
	if got := strings.TrimSpace(string(data)); got != "ws://"+p.addr {
		t.Errorf("address file holds %q, want ws://%s", got, p.addr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("address file mode %v, %v", fi.Mode(), err)
	}
	ep, err := client.Locate(client.LocateOptions{StateDir: e.state, Getenv: func(string) string { return "" }})
	if err != nil || ep.URL != "ws://"+p.addr || ep.Token != e.token(t) {
		t.Errorf("Locate = %+v, %v", ep, err)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(exitTimeout); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the address file outlived the daemon: %v", err)
	}
}

func TestClientURL(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"127.0.0.1:9187", "ws://127.0.0.1:9187"},
		{"0.0.0.0:9187", "ws://127.0.0.1:9187"},
		{"[::]:9187", "ws://[::1]:9187"},
		{"[::1]:80", "ws://[::1]:80"},
	}
	for _, tt := range tests {
		a, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := clientURL(a); got != tt.want {
			t.Errorf("clientURL(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}
