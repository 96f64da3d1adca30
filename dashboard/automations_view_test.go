package dashboard

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// TestAutomationWatchError: an automation whose trigger does not watch
// shows the host's reason on its row.
func TestAutomationWatchError(t *testing.T) {
	e := protocol.AutomationEntry{Resource: "ahp-automation:/w", Definition: protocol.AutomationDefinition{Enabled: true}}
	if v := automationOf(&e); v.WatchError != "" {
		t.Errorf("a watching automation shows %q", v.WatchError)
	}
	e.Meta = protocol.Object{"ahpd.watchError": jsontext.Value(`{"errorType":"watchFailed","message":"trigger \"w\": the watcher stopped"}`)}
	if v := automationOf(&e); v.WatchError != `trigger "w": the watcher stopped` {
		t.Errorf("the watch error shown: %q", v.WatchError)
	}
}
