package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/client"
)

func TestLocate(t *testing.T) {
	state := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(state, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write(client.AddressFile, "ws://127.0.0.1:4242\n")
	write(client.TokenFile, "from-state\n")
	tokenFile := write("other-token", "  from-file \n")

	tests := []struct {
		name      string
		opts      client.LocateOptions
		env       map[string]string
		wantURL   string
		wantToken string
	}{
		{"the state directory", client.LocateOptions{}, nil, "ws://127.0.0.1:4242", "from-state"},
		{"the environment wins over it", client.LocateOptions{},
			map[string]string{"AHPD_URL": "ws://127.0.0.1:1", "AHPD_TOKEN": "from-env"}, "ws://127.0.0.1:1", "from-env"},
		{"flags win over the environment", client.LocateOptions{URL: "ws://127.0.0.1:2", Token: "from-flag"},
			map[string]string{"AHPD_URL": "ws://127.0.0.1:1", "AHPD_TOKEN": "from-env"}, "ws://127.0.0.1:2", "from-flag"},
		{"a token file", client.LocateOptions{TokenFile: tokenFile},
			map[string]string{"AHPD_TOKEN": "from-env"}, "ws://127.0.0.1:4242", "from-file"},
		// The state directory's token is the local daemon's: another
		// address gets none unless given one.
		{"another host gets no local token", client.LocateOptions{URL: "ws://203.0.113.9:4242"}, nil, "ws://203.0.113.9:4242", ""},
		{"another port neither", client.LocateOptions{URL: "ws://127.0.0.1:4243"}, nil, "ws://127.0.0.1:4243", ""},
		{"nor another host from the environment", client.LocateOptions{}, map[string]string{"AHPD_URL": "ws://example.invalid:4242"}, "ws://example.invalid:4242", ""},
		{"the local address spelled otherwise does", client.LocateOptions{URL: "http://127.0.0.1:4242/"}, nil, "http://127.0.0.1:4242/", "from-state"},
		{"another host given a token", client.LocateOptions{URL: "ws://203.0.113.9:4242", Token: "mine"}, nil, "ws://203.0.113.9:4242", "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.StateDir = state
			tt.opts.Getenv = func(k string) string { return tt.env[k] }
			ep, err := client.Locate(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if ep.URL != tt.wantURL || ep.Token != tt.wantToken {
				t.Errorf("Locate = %+v, want %s %s", ep, tt.wantURL, tt.wantToken)
			}
			if withheld := ep.Withheld != ""; withheld != (tt.wantToken == "") || (withheld && ep.Home != "ws://127.0.0.1:4242") {
				t.Errorf("Locate = %+v: Withheld, Home", ep)
			}
		})
	}
}

func TestLocateWithoutADaemon(t *testing.T) {
	xdg := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": xdg}
	_, err := client.Locate(client.LocateOptions{Getenv: func(k string) string { return env[k] }})
	if !errors.Is(err, client.ErrNoDaemon) || !strings.Contains(err.Error(), "start one with `ahpd`") ||
		!strings.Contains(err.Error(), filepath.Join(xdg, "ahpd")) {
		t.Errorf("Locate without a daemon = %v", err)
	}
	// A missing token is no error: the daemon may ask none.
	if err := os.MkdirAll(filepath.Join(xdg, "ahpd"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "ahpd", client.AddressFile), []byte("ws://127.0.0.1:9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ep, err := client.Locate(client.LocateOptions{Getenv: func(k string) string { return env[k] }})
	if err != nil || ep.Token != "" || ep.URL != "ws://127.0.0.1:9" {
		t.Errorf("Locate = %+v, %v", ep, err)
	}
	_, err = client.Locate(client.LocateOptions{URL: "ws://x", TokenFile: filepath.Join(xdg, "missing")})
	if err == nil {
		t.Error("a token file that does not exist was taken")
	}
}
