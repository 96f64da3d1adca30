package protocol_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// changedSince08 lists the action types that are new in 0.9 and 1.0, or
// whose shape (or the shape of something they carry) changed since the 0.8
// snapshot the upstream vectors were made for: the definitions of 1.0
// compared with ../shared/ahp/schema, descriptions aside.
var changedSince08 = []protocol.ActionType{
	protocol.ActionAnnotationsSet, protocol.ActionAnnotationsUpdated,
	protocol.ActionAutomationCreateRequested, protocol.ActionAutomationRemoved, protocol.ActionAutomationSet,
	protocol.ActionAutomationUpdateRequested, protocol.ActionAutomationRunCancelRequested,
	protocol.ActionAutomationRunLifecycleChanged, protocol.ActionAutomationRunPrimarySessionChanged,
	protocol.ActionAutomationRunSessionRemoved, protocol.ActionAutomationRunSessionSet,
	protocol.ActionCanvasStateChanged,
	protocol.ActionChangesetContentChanged, protocol.ActionChangesetFileSet, protocol.ActionChangesetStatusChanged,
	protocol.ActionChatBackgroundWorkRemoved, protocol.ActionChatBackgroundWorkSet, protocol.ActionChatCanvasesChanged,
	protocol.ActionChatChangesetsChanged, protocol.ActionChatDraftChanged, protocol.ActionChatError,
	protocol.ActionChatIsArchivedChanged, protocol.ActionChatIsReadChanged, protocol.ActionChatMovableChanged,
	protocol.ActionChatPendingMessageSet, protocol.ActionChatResponsePart, protocol.ActionChatToolCallComplete,
	protocol.ActionChatToolCallContentChanged, protocol.ActionChatToolCallConfirmed, protocol.ActionChatToolCallReady,
	protocol.ActionChatTurnResume, protocol.ActionChatTurnStarted, protocol.ActionChatTurnsLoaded,
	protocol.ActionRootAgentsChanged, protocol.ActionRootTerminalsChanged,
	protocol.ActionSessionActiveClientSet, protocol.ActionSessionChatAdded, protocol.ActionSessionChatUpdated,
	protocol.ActionSessionChatsReordered, protocol.ActionSessionCustomizationToggled,
	protocol.ActionSessionCustomizationUpdated, protocol.ActionSessionCustomizationsChanged,
	protocol.ActionSessionInputNeededSet, protocol.ActionSessionMCPServerBackgroundRequested,
	protocol.ActionSessionMCPServerStateChanged, protocol.ActionSessionWorkingDirectoryReplaced,
	protocol.ActionTerminalClaimed,
}

// TestVectorsCoverWhatChanged holds the project's vectors to cover every
// action type new or changed since 0.8 at least once.
func TestVectorsCoverWhatChanged(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(projectVectors, "reducers", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[protocol.ActionType]int{}
	for _, path := range files {
		var v reducerVector
		readJSON(t, path, &v)
		for _, raw := range v.Actions {
			var a struct {
				Type protocol.ActionType `json:"type"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			seen[a.Type]++
		}
	}
	for _, at := range changedSince08 {
		if _, ok := at.IntroducedIn(); !ok {
			t.Errorf("%s is not an action type of this version", at)
		}
		if seen[at] == 0 {
			t.Errorf("no vector in %s exercises %s", projectVectors, at)
		}
	}
}

// TestUpdatedVectorsDiffer checks each vector kept under an upstream name
// really changes it: an unchanged copy would hide the upstream one.
func TestUpdatedVectorsDiffer(t *testing.T) {
	for _, sub := range []string{"reducers", "round-trips"} {
		upstream := map[string]string{}
		for _, p := range upstreamVectors(t, sub) {
			upstream[filepath.Base(p)] = p
		}
		ours, _ := filepath.Glob(filepath.Join(projectVectors, sub, "*.json"))
		for _, p := range ours {
			up, ok := upstream[filepath.Base(p)]
			if !ok {
				continue
			}
			a, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(up)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(a, b) || jsonEqual(t, a, b) {
				t.Errorf("%s is the same as the upstream vector", p)
			}
		}
	}
}
