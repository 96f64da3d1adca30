package host_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// TestNewFailsLeavingNothing checks that a New that fails at its last
// step (the config declares an automation twice) stops what it had
// started: the record writer, the catalogue's watching of transcripts and
// the sweep of trees. Not parallel: it counts the goroutines left.
func TestNewFailsLeavingNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	state := t.TempDir()
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts", "script"))); err != nil {
		t.Fatal(err)
	}
	const uri = "ahp-automation:/twice"
	decl := automations.Declared{Resource: uri, Definition: protocol.AutomationDefinition{
		Title:   "declared twice",
		Message: protocol.Message{Text: "say hi", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}},
		Session: protocol.AutomationSessionTemplate{WorkingDirectories: []protocol.URI{"file://" + work}},
	}}
	o := host.Options{
		StateDir:         state,
		Backends:         backends,
		Logger:           slog.New(slog.DiscardHandler),
		Version:          "test",
		DefaultDirectory: work,
		Auth:             &grants.Authenticator{Host: "test"},
		Automations:      host.AutomationOptions{NewRunner: runAsOwner},
	}
	withTranscripts(&o)
	o.Automations.Declared = []automations.Declared{decl, decl}
	h, err := host.New(o)
	if err == nil {
		t.Cleanup(func() { _ = h.Close(t.Context()) })
		t.Fatal("New took an automation declared twice")
	}
	if !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("New failed otherwise: %v", err)
	}
}
