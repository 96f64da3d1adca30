package webhooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ahpd/ahpd/events"
)

// TestCheck is the config's table: what is taken, with its defaults, and
// what is refused, with an error naming the entry and the field.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("  from-a-file-0123456789  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := "0123456789abcdef"
	all := []string{"needs_input", "turn_completed", "turn_failed", "automation_run_finished"}
	ok := func(url string) Spec { return Spec{URL: url, Events: all, Secret: key} }
	with := func(s Spec, f func(*Spec)) Spec { f(&s); return s }
	tests := []struct {
		name  string
		specs []Spec
		err   string // "" when taken
		check func(t *testing.T, ws []Webhook)
	}{
		{name: "https anywhere, with the defaults", specs: []Spec{ok("https://hooks.example.com/ahpd/T0KEN")}, check: func(t *testing.T, ws []Webhook) {
			w := ws[0]
			if w.Name != "hooks.example.com" || w.RetryFor != time.Hour || w.Timeout != 10*time.Second || w.MaxPending != 1000 || string(w.Secret) != key || len(w.Events) != 4 {
				t.Errorf("%+v", w)
			}
		}},
		{name: "http to 127.0.0.1", specs: []Spec{ok("http://127.0.0.1:8080/hook")}},
		{name: "http to 127.1.2.3", specs: []Spec{ok("http://127.1.2.3/hook")}},
		{name: "http to [::1]", specs: []Spec{ok("http://[::1]:9/hook")}, check: func(t *testing.T, ws []Webhook) {
			if ws[0].Name != "1" { // "::1", as a name spells it
				t.Errorf("name %q", ws[0].Name)
			}
		}},
		{name: "http to localhost", specs: []Spec{ok("http://localhost:9/hook")}},
		{name: "https to a private address", specs: []Spec{ok("https://10.1.2.3/hook")}},
		{name: "http beyond loopback, allowed", specs: []Spec{with(ok("http://10.1.2.3/hook"), func(s *Spec) { s.AllowInsecure = true })}},
		{name: "link-local, allowed", specs: []Spec{with(ok("http://169.254.169.254/"), func(s *Spec) { s.AllowInsecure = true })}},
		{name: "a secret file, trimmed", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret, s.SecretFile = "", keyFile })}, check: func(t *testing.T, ws []Webhook) {
			if string(ws[0].Secret) != "from-a-file-0123456789" {
				t.Errorf("secret %q", []byte(ws[0].Secret))
			}
		}},
		{name: "unsigned, said so", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret, s.Unsigned = "", true })}, check: func(t *testing.T, ws []Webhook) {
			if ws[0].Secret != nil {
				t.Error("an unsigned webhook has a secret")
			}
		}},
		{name: "events once each, and settings", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) {
			s.Name, s.Events, s.RetryFor, s.Timeout, s.MaxPending = "ops", []string{"turn_failed", "turn_failed"}, 3*time.Hour, 30*time.Second, 50
		})}, check: func(t *testing.T, ws []Webhook) {
			w := ws[0]
			if w.Name != "ops" || len(w.Events) != 1 || w.Events[0] != events.TurnFailed || w.RetryFor != 3*time.Hour || w.Timeout != 30*time.Second || w.MaxPending != 50 {
				t.Errorf("%+v", w)
			}
		}},
		{name: "two to one host, named", specs: []Spec{with(ok("https://x.example/a"), func(s *Spec) { s.Name = "a" }), with(ok("https://x.example/b"), func(s *Spec) { s.Name = "b" })}},

		{name: "no URL", specs: []Spec{ok("")}, err: "webhooks[0].url: none"},
		{name: "plain http beyond this machine", specs: []Spec{ok("https://ok.example/"), ok("http://hooks.example.com/T0KEN")}, err: "webhooks[1].url: http://hooks.example.com is plain http beyond this machine: use https"},
		{name: "a private address over http", specs: []Spec{ok("http://192.168.1.20:8080/T0KEN")}, err: "webhooks[0].url: http://192.168.1.20:8080 names a private address over plain http: use https, or set allowInsecure: true"},
		{name: "link-local over https", specs: []Spec{ok("https://169.254.169.254/latest")}, err: "webhooks[0].url: https://169.254.169.254 names a link-local"},
		{name: "link-local IPv6", specs: []Spec{ok("http://[fe80::1%25eth0]/")}, err: "names a link-local"},
		{name: "unspecified", specs: []Spec{ok("http://0.0.0.0:80/")}, err: "names a link-local, multicast or unspecified address"},
		{name: "another scheme", specs: []Spec{ok("ftp://x.example/")}, err: `webhooks[0].url: scheme "ftp": https:// or http:// only`},
		{name: "no scheme", specs: []Spec{ok("x.example/hook")}, err: "webhooks[0].url: no scheme"},
		{name: "credentials in the URL", specs: []Spec{ok("https://me:pa55word@x.example/")}, err: "carries credentials"},
		{name: "a fragment", specs: []Spec{ok("https://x.example/#top")}, err: "fragment"},
		{name: "no events", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Events = nil })}, err: "webhooks[0].events: none: name the events it is sent, of needs_input, turn_completed, turn_failed, automation_run_finished"},
		{name: "an unknown event", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Events = []string{"turn_completed", "turn_cancelled"} })}, err: `webhooks[0].events[1]: "turn_cancelled" is no event`},
		{name: "no secret", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret = "" })}, err: "webhooks[0]: no secret: give secret or secretFile (at least 16 bytes"},
		{name: "a short secret", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret = "hunter2" })}, err: "webhooks[0].secret: 7 bytes: a secret has at least 16"},
		{name: "a short secret file", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret, s.SecretFile = "", short })}, err: "webhooks[0].secretFile: 4 bytes"},
		{name: "a missing secret file", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Secret, s.SecretFile = "", filepath.Join(dir, "none") })}, err: "webhooks[0].secretFile: open"},
		{name: "secret and secretFile", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.SecretFile = keyFile })}, err: "webhooks[0]: secret and secretFile: give one of them"},
		{name: "unsigned with a secret", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Unsigned = true })}, err: "webhooks[0]: unsigned: true with a secret"},
		{name: "a bad name", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Name = "ops team" })}, err: `webhooks[0].name: "ops team"`},
		{name: "two with one name", specs: []Spec{with(ok("https://a.example/"), func(s *Spec) { s.Name = "ops" }), with(ok("https://b.example/"), func(s *Spec) { s.Name = "ops" })}, err: `webhooks[1].name: "ops" is the name of webhooks[0] too`},
		{name: "two to one host, unnamed", specs: []Spec{ok("https://x.example/a"), ok("https://x.example/b")}, err: `webhooks[1]: a second webhook named "x.example", after webhooks[0] (its URL's host): give each a name`},
		{name: "retryFor too short", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.RetryFor = time.Second })}, err: "webhooks[0].retryFor: 1s: from 1m0s to 168h0m0s"},
		{name: "a negative timeout", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.Timeout = -time.Second })}, err: "webhooks[0].timeout: -1s"},
		{name: "maxPending too many", specs: []Spec{with(ok("https://x.example/"), func(s *Spec) { s.MaxPending = 1 << 20 })}, err: "webhooks[0].maxPending: 1048576: from 1 to 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := Check(tt.specs)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && err == nil:
				t.Fatalf("taken: %+v; want %q", ws, tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Fatalf("error %q, want it to say %q", err, tt.err)
			}
			if err != nil {
				for _, hidden := range []string{"T0KEN", "pa55word", key, "hunter2", "from-a-file"} {
					if strings.Contains(err.Error(), hidden) {
						t.Errorf("the error shows %q: %v", hidden, err)
					}
				}
				return
			}
			if tt.check != nil {
				tt.check(t, ws)
			}
		})
	}
}

// TestBodyIsBounded: what clients and agents wrote is cut, at a
// character, to a few KB, and a body never passes MaxBody.
func TestBodyIsBounded(t *testing.T) {
	huge := strings.Repeat("é", 100_000) // two bytes each: cuts land inside some
	var qs []events.Question
	for range 50 {
		var opts []events.Option
		for range 50 {
			opts = append(opts, events.Option{ID: huge, Label: huge})
		}
		qs = append(qs, events.Question{ID: "q", Kind: "single-select", Message: huge, Options: opts})
	}
	ev := events.Event{
		Kind: events.NeedsInput, Time: epoch,
		Session: events.Session{URI: "ahp-session:/s1", ID: "s1", Title: huge},
		Turn:    &events.Turn{ID: "t1"},
		Request: &events.Request{ID: "ask-1", Kind: events.RequestQuestion, Text: huge, Questions: qs},
	}
	data, key := bodyOf("evt_1", ev)
	if len(data) > MaxBody {
		t.Errorf("a body of %d bytes, over %d", len(data), MaxBody)
	}
	if key != "ahp-session:/s1" {
		t.Errorf("ordered by %q", key)
	}
	var b Body
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"title": b.Session.Title, "text": b.Request.Text} {
		if !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || len(s) > maxText {
			t.Errorf("%s: %d bytes, valid %v, ends %q", what, len(s), utf8.ValidString(s), s[len(s)-6:])
		}
	}
	if !b.Request.Truncated || b.Request.AnswerPath != "/v1/sessions/s1/questions/ask-1" {
		t.Errorf("request: truncated %v, answerPath %q", b.Request.Truncated, b.Request.AnswerPath)
	}
	if b.Turn == nil || b.Turn.State != "" || b.Turn.DurationMs != nil {
		t.Errorf("a waiting turn: %+v", b.Turn)
	}

	// A run that made no session is ordered by itself.
	_, key = bodyOf("evt_2", events.Event{Kind: events.AutomationRunFinished, Time: epoch, Run: &events.Run{URI: "ahp-automation-run:/r1", Outcome: "failed", Error: huge}})
	if key != "ahp-automation-run:/r1" {
		t.Errorf("a run without a session is ordered by %q", key)
	}
}

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"ééééééé", 10, "ééé…"}, // 14 bytes; 7 left for the text, which ends mid-character: three é
	} {
		if got := cut(tt.in, tt.max); got != tt.want || len(got) > tt.max {
			t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
