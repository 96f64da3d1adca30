package host_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// TestDefaultProvider: a session naming no provider runs on what
// Options.DefaultProvider picks, asked each time; when it says there is
// none, createSession is refused with its reason (-32002), and so is an
// automation naming no provider, as it is made rather than at its first
// run. Without the option the first backend registered is taken.
func TestDefaultProvider(t *testing.T) {
	t.Parallel()
	pick := errors.New("no agent to run it on: install one")
	th := startHost(t, "", func(o *host.Options) {
		o.DefaultProvider = func() (string, error) { return "", pick }
	})
	c := th.client("c1")
	_, err := c.Call("createSession", map[string]any{"channel": "ahp-session:/none"})
	if err == nil || err.Code != int64(protocol.CodeProviderNotFound) || !strings.Contains(err.Message, "install one") {
		t.Fatalf("createSession with no provider and none to pick: %v", err)
	}
	c.Subscribe("ahp-automations://")
	def := protocol.AutomationDefinition{Title: "T", Message: protocol.Message{Text: "say x", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindAutomation}}, Triggers: []protocol.AutomationTrigger{}}
	seq := c.Dispatch("ahp-automations://", &protocol.AutomationCreateRequestedAction{Resource: "ahp-automation:/a1", Definition: def})
	if reason := rejection(t, c, seq); !strings.Contains(reason, "install one") {
		t.Errorf("an automation naming no provider was refused with %q", reason)
	}
	def.Session.Provider = new("script")
	if reason := rejection(t, c, c.Dispatch("ahp-automations://", &protocol.AutomationCreateRequestedAction{Resource: "ahp-automation:/a2", Definition: def})); reason != "" {
		t.Errorf("an automation naming its provider was refused: %s", reason)
	}

	pick = nil
	th2 := startHost(t, "", func(o *host.Options) {
		o.DefaultProvider = func() (string, error) { return "script", pick }
	})
	c2 := th2.client("c2")
	c2.MustCall("createSession", map[string]any{"channel": "ahp-session:/picked"})
	c2.Subscribe("ahp-session:/picked")
	if ss := c2.State("ahp-session:/picked").(*protocol.SessionState); ss.Provider != "script" {
		t.Errorf("the session runs on %q", ss.Provider)
	}

	th3 := startHost(t, "")
	c3 := th3.client("c3")
	c3.MustCall("createSession", map[string]any{"channel": "ahp-session:/first"})
}

// TestSessionStatusOperations: ahpd/sessionStatus asked for them names
// the operations the caller may do to the session.
func TestSessionStatusOperations(t *testing.T) {
	t.Parallel()
	th, tokens := usersHost(t, t.TempDir())
	mo := dialAs(t, th, tokens["mo"], "mo")
	mia := dialAs(t, th, tokens["mia"], "mia")
	f := newFixture(t, th, mo, "owned", "team")
	ops := func(c interface {
		MustCall(string, any) json.RawMessage
	}) []string {
		var res struct{ Operations []string }
		if err := json.Unmarshal(c.MustCall("ahpd/sessionStatus", map[string]any{"channel": f.session, "operations": true}), &res); err != nil {
			t.Fatal(err)
		}
		return res.Operations
	}
	if got := ops(mo); !slices.Contains(got, "chat:answer") || !slices.Contains(got, "chat:tool") || !slices.Contains(got, "session:dispose") {
		t.Errorf("the owner may %v", got)
	}
	if got := ops(mia); !slices.Contains(got, "chat:answer") || slices.Contains(got, "session:dispose") {
		t.Errorf("another member may %v", got)
	}
}
