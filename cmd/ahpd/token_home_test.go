package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestCLITokenStaysHome: the local daemon's connection token goes only
// to the address its state directory records. `--url` (or AHPD_URL) to
// another listener, here one on 127.0.0.1 that records what it is sent
// and refuses everybody, gets no token unless one is given, and the
// command says how to give one.
func TestCLITokenStaysHome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(e.state, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("connection-token", "local-secret\n")
	write("address", "ws://127.0.0.1:1\n")

	var mu sync.Mutex
	var sent []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization")+"|"+r.URL.Query().Get("tkn"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer other.Close()
	url := "ws" + strings.TrimPrefix(other.URL, "http")
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := sent
		sent = nil
		return out
	}

	r := cli(t, e, "ls", "--url", url)
	if r.code != exitFailed || !strings.Contains(r.stderr, url+" wants a token: pass --token or --token-file, or set AHPD_TOKEN") ||
		!strings.Contains(r.stderr, "goes only to its own address, ws://127.0.0.1:1") {
		t.Errorf("ahpd ls --url another: %d %q", r.code, r.stderr)
	}
	if got := took(); !slices.Equal(got, []string{"|"}) {
		t.Errorf("--url another was sent %q, want no token", got)
	}

	e.extraEnv = []string{"AHPD_URL=" + url}
	cli(t, e, "ls")
	if got := took(); !slices.Equal(got, []string{"|"}) {
		t.Errorf("AHPD_URL another was sent %q, want no token", got)
	}
	e.extraEnv = append(e.extraEnv, "AHPD_TOKEN=from-env")
	cli(t, e, "ls")
	if got := took(); !slices.Equal(got, []string{"Bearer from-env|"}) {
		t.Errorf("AHPD_URL with AHPD_TOKEN sent %q", got)
	}
	e.extraEnv = nil

	cli(t, e, "ls", "--url", url, "--token", "given")
	if got := took(); !slices.Equal(got, []string{"Bearer given|"}) {
		t.Errorf("--url with --token sent %q", got)
	}

	// At the address the state directory records, the token is the one
	// that daemon made.
	write("address", url+"\n")
	cli(t, e, "ls", "--url", url)
	if got := took(); !slices.Equal(got, []string{"Bearer local-secret|"}) {
		t.Errorf("the local daemon's own address was sent %q", got)
	}
}
