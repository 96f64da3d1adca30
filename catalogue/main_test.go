package catalogue

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/internal/testwait"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/claude"
	"github.com/ahpd/ahpd/plugins/script"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The backends whose transcripts the tests list.
const (
	providerClaude = claude.Provider
	providerScript = script.Provider
)

// claudeAt returns the Claude Code CLI's projects folder as the catalogue
// takes it.
func claudeAt(projects string) []plugins.TranscriptRoot {
	return []plugins.TranscriptRoot{claude.TranscriptRoot(projects)}
}

// scriptAt returns a script backend's transcript folder as the catalogue
// takes it.
func scriptAt(dir string) []plugins.TranscriptRoot {
	return []plugins.TranscriptRoot{script.TranscriptRoot(dir)}
}

// base is the time test transcripts start at.
var base = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// changes gathers what a catalogue reports.
type changes struct {
	mu   sync.Mutex
	all  []Change
	sig  chan struct{}
	seen int // batches
}

func newChanges() *changes { return &changes{sig: make(chan struct{}, 1)} }

func (c *changes) on(batch []Change) {
	c.mu.Lock()
	c.all = append(c.all, batch...)
	c.seen++
	c.mu.Unlock()
	select {
	case c.sig <- struct{}{}:
	default:
	}
}

func (c *changes) batches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// wait returns the first change after from that satisfies ok, and the
// position after it.
func (c *changes) wait(t *testing.T, from int, ok func(Change) bool) (Change, int) {
	t.Helper()
	deadline := time.After(testwait.Hang)
	for {
		c.mu.Lock()
		for i := from; i < len(c.all); i++ {
			if ok(c.all[i]) {
				ch := c.all[i]
				c.mu.Unlock()
				return ch, i + 1
			}
		}
		c.mu.Unlock()
		select {
		case <-c.sig:
		case <-deadline:
			t.Fatalf("no such change after %d (have %v)", from, c.snapshot())
		}
	}
}

func (c *changes) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

func (c *changes) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ch := range c.all {
		out = append(out, ch.Kind.String()+" "+ch.Row.URI())
	}
	return out
}

// open starts a catalogue on cfg and waits for its first scan.
func open(t *testing.T, cfg Config) *Catalogue {
	t.Helper()
	c := Open(cfg)
	t.Cleanup(func() { c.Close() })
	select {
	case <-c.Ready():
	case <-time.After(testwait.Hang):
		t.Fatal("first scan did not end")
	}
	return c
}

// session returns a small transcript description in cwd.
func session(id, cwd string) *corpus.Session {
	return &corpus.Session{
		ID: id, Cwd: cwd, Branch: "main", Start: base,
		Prompts: []string{"Fix the flaky test in parser_test.go", "Now run the benchmarks"},
		Tools:   true,
	}
}

func create(t *testing.T, projects string, s *corpus.Session) string {
	t.Helper()
	path, err := corpus.Create(projects, s)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path string, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func lookup(t *testing.T, c *Catalogue, provider, id string) Row {
	t.Helper()
	r, ok := c.Lookup(provider, id)
	if !ok {
		t.Fatalf("no row for %s:/%s; rows: %d", provider, id, len(c.Rows()))
	}
	return r
}
