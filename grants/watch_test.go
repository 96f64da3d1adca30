package grants

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/testwait"
)

// syncBuffer is a log destination safe to read while the watcher writes,
// which tells a reader waiting for a line when one is written.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // closed, and replaced, at each write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wrote != nil {
		close(b.wrote)
		b.wrote = nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// next returns a channel closed at the next write; nil for no buffer.
func (b *syncBuffer) next() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wrote == nil {
		b.wrote = make(chan struct{})
	}
	return b.wrote
}

func newLogger() (*slog.Logger, *syncBuffer) {
	var buf syncBuffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// eventually fails the test unless cond comes to hold. It looks again
// each time the watcher stores a directory (live.Changed) or writes to
// logs (nil for a watcher that logs nowhere), never on the clock; the
// timeout only ends a test that would otherwise hang.
func eventually(t *testing.T, live *Live, logs *syncBuffer, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(testwait.Hang)
	for {
		changed, wrote := live.Changed(), logs.next()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-wrote:
		case <-timeout:
			t.Fatalf("never: %s", what)
		}
	}
}

func TestWatchReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	d := testDirectory(t)
	tok, _ := d.IssueToken("bob", "")
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	log, logs := newLogger()
	live, err := Watch(path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if p, ok := live.Current().Authenticate(tok); !ok || p != UserPrincipal("bob") {
		t.Fatal("the token is refused before any change")
	}

	// Revoke through the management API, which replaces the file by a
	// rename.
	if err := d.RevokeAll("bob"); err != nil {
		t.Fatal(err)
	}
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, logs, "a revoked token is refused", func() bool {
		_, ok := live.Current().Authenticate(tok)
		return !ok
	})

	// Edit the file in place, as some editors do.
	data, _ := os.ReadFile(path)
	data = bytes.Replace(data, []byte("id: gina\n    role: guest"), []byte("id: gina\n    role: admin"), 1)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, logs, "gina's new role is seen", func() bool {
		u, _ := live.Current().Lookup("gina")
		return u.Role == Admin
	})
	if !strings.Contains(logs.String(), "users file reloaded") {
		t.Errorf("no reload logged:\n%s", logs)
	}

	// A malformed file keeps the last good directory, and says why.
	if err := os.WriteFile(path, []byte("users:\n  - id: gina\n    role: boss\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, logs, "the malformed file is logged", func() bool {
		return strings.Contains(logs.String(), "keeping the last good directory")
	})
	if !strings.Contains(logs.String(), "want admin, member or guest") {
		t.Errorf("the log does not say what is wrong:\n%s", logs)
	}
	if u, ok := live.Current().Lookup("gina"); !ok || u.Role != Admin {
		t.Error("a malformed file replaced the directory")
	}
	if err := live.Reload(); err == nil {
		t.Error("Reload of a malformed file succeeded")
	}

	// Fixed again.
	if err := os.WriteFile(path, []byte("users:\n  - {id: zed, role: guest}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, logs, "the fixed file is read", func() bool {
		_, ok := live.Current().Lookup("zed")
		return ok
	})

	// Removed: nobody has a token.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, logs, "the removed file empties the directory", func() bool {
		return len(live.Current().Users()) == 0
	})

	if err := live.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	live.Close() // twice is fine
	if live.Current() == nil {
		t.Error("Current after Close is nil")
	}
}

func TestWatchStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.yaml")

	// Missing: empty, and picked up when it appears.
	live, err := Watch(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if live.Path() != path || len(live.Current().Users()) != 0 {
		t.Fatalf("Path %s, %d users", live.Path(), len(live.Current().Users()))
	}
	d := testDirectory(t)
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, live, nil, "a new file is read", func() bool { return len(live.Current().Users()) == 4 })

	// Malformed at start: an error, no watcher left running.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("users: [\n"), 0o600)
	if _, err := Watch(bad, nil); err == nil {
		t.Error("Watch(malformed) succeeded")
	}
	if _, err := Watch(filepath.Join(dir, "no", "such", "users.yaml"), nil); err == nil {
		t.Error("Watch in a missing directory succeeded")
	}
}

// TestWatchChanged waits on Changed: it fires once the new directory is
// current, and not for a file that does not parse.
func TestWatchChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	d := testDirectory(t)
	tok, _ := d.IssueToken("bob", "")
	must(t, d.Save(path))
	log, logs := newLogger()
	live, err := Watch(path, log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	a := &Authenticator{Host: "h", Users: live}
	cred, ok := a.Login(tok)
	if !ok {
		t.Fatal("the token is refused")
	}

	changed := a.Changed()
	must(t, d.RevokeAll("bob"))
	must(t, d.Save(path))
	select {
	case <-changed:
	case <-time.After(testwait.Hang):
		t.Fatal("Changed did not fire for a revoked token")
	}
	if err := a.Recheck(cred); !errors.Is(err, ErrTokenRevoked) {
		t.Errorf("Recheck once Changed fired = %v, want the token revoked", err)
	}

	changed = a.Changed()
	must(t, os.WriteFile(path, []byte("users: [\n"), 0o600))
	eventually(t, live, logs, "the malformed file is logged", func() bool {
		return strings.Contains(logs.String(), "keeping the last good directory")
	})
	select {
	case <-changed:
		t.Error("Changed fired for a file that does not parse")
	default:
	}
	must(t, os.Remove(path))
	select {
	case <-changed:
	case <-time.After(testwait.Hang):
		t.Fatal("Changed did not fire for a removed file")
	}
}
