package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// TestAutomationShowsWatchError: an automation whose trigger does not
// watch says so where a person looks, `ahpd automations show`, with the
// host's reason; one that watches says nothing of it.
func TestAutomationShowsWatchError(t *testing.T) {
	entry := protocol.AutomationEntry{Resource: "ahp-automation:/w", Definition: protocol.AutomationDefinition{Title: "docs", Enabled: true}}
	show := func(e protocol.AutomationEntry) string {
		var out bytes.Buffer
		printAutomation(cliIO{stdout: &out, stderr: &out}, e, nil)
		return out.String()
	}
	if got := show(entry); strings.Contains(got, "watching") {
		t.Errorf("a watching automation: %s", got)
	}
	entry.Meta = protocol.Object{"ahpd.watchError": jsontext.Value(`{"errorType":"watchGone","message":"trigger \"w\": folder /srv/docs is not there"}`)}
	if got := show(entry); !strings.Contains(got, `watching    no (watchGone): trigger "w": folder /srv/docs is not there`) {
		t.Errorf("an automation that does not watch: %s", got)
	}
}
