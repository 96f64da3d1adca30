package host_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/clock"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// TestVSCodeOpeningConversation replays what VS Code (1.139, and a newer
// build that offers 1.0.0 first) sends when a window opens and a person
// types their first message, as seen on the wire, and checks each answer.
func TestVSCodeOpeningConversation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		offered []string
		want    string
	}{
		{"vscode-1.139", []string{"0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"}, "0.9.0"},
		{"vscode-newer", []string{"1.0.0", "0.9.0", "0.7.0"}, "1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := startHost(t, "")
			watcher := th.client("watcher") // another window, on root
			c := hosttest.Dial(t, th.url)
			res := c.InitializeWith(map[string]any{
				"channel": protocol.RootURI, "protocolVersions": tc.offered, "clientId": "vscode-1",
				"clientInfo":           map[string]any{"name": "vscode-editor-window", "version": "1.139.0"},
				"initialSubscriptions": []string{protocol.RootURI},
				"_meta":                map[string]any{"vscode.telemetryLevel": "off", "vscode.clientConnectionKind": "local"},
			})
			if res.ProtocolVersion != tc.want {
				t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, tc.want)
			}
			for _, a := range res.Snapshots[0].State.(*protocol.RootState).Agents {
				if a.ProtectedResources == nil {
					t.Errorf("agent %s has no protectedResources: VS Code would ask for a sign-in", a.Provider)
				}
			}

			// Seven root/configChanged, clientSeq 0, with ~38 keys ahpd does
			// not know beside one it does.
			for i := range 7 {
				c.Notify("dispatchAction", map[string]any{"channel": protocol.RootURI, "clientSeq": 0,
					"action": map[string]any{"type": "root/configChanged", "config": vscodeSettings(i)}})
			}
			c.Notify("setClientManagedSettingsPermissions", map[string]any{"permissions": []string{"http.proxy"}})
			listSessions(t, c, nil)
			c.Wait("the root config echoes", func(msgs []hosttest.Message) bool {
				return len(echoes(msgs, protocol.RootURI)) == 7
			})
			for _, e := range echoes(c.Messages(), protocol.RootURI) {
				if e.RejectionReason != nil {
					t.Errorf("root/configChanged refused: %s", *e.RejectionReason)
				}
			}
			values := c.State(protocol.RootURI).(*protocol.RootState).Config.Values
			for _, k := range []string{"http.proxy", "telemetryLevel", "terminalAutoApproveRules", "setting37"} {
				if _, ok := values[k]; !ok {
					t.Errorf("root config lost %s", k)
				}
			}
			if len(c.Orphans()) != 0 {
				t.Errorf("errors answering no request: %+v", c.Orphans())
			}

			// Showing an empty agent chat: a burst of resolveSessionConfig,
			// not waited on one by one, then createSession with mode.
			var burst []*hosttest.Pending
			for range 8 {
				burst = append(burst, c.Start("resolveSessionConfig", map[string]any{"channel": protocol.RootURI,
					"provider": "script", "workingDirectory": "file://" + th.work}))
			}
			for _, p := range burst {
				if _, err := p.Await(); err != nil {
					t.Fatalf("resolveSessionConfig: %v", err)
				}
			}
			session := "script:/" + strings.ReplaceAll(tc.name, ".", "-")
			chat := protocol.DefaultChatURI(session)
			c.MustCall("createSession", map[string]any{"channel": session, "workingDirectories": []string{"file://" + th.work},
				"config":        map[string]any{"isolation": "folder", "autoApprove": "default", "mode": "interactive"},
				"progressToken": "create-1"})

			// The active client, with its tools and 1.0 plugin
			// customizations, before subscribe; then more tool updates.
			for i := range 13 {
				c.Notify("dispatchAction", map[string]any{"channel": session, "clientSeq": c.NextSeq(),
					"action": map[string]any{"type": "session/activeClientSet", "activeClient": vscodeClient(i + 1)}})
			}
			snap := c.Subscribe(session).State.(*protocol.SessionState)
			if len(snap.ActiveClients) != 1 || len(snap.ActiveClients[0].Tools) != 13 || len(snap.ActiveClients[0].Customizations) != 1 {
				t.Fatalf("active clients after the burst: %+v", snap.ActiveClients)
			}
			if n := len(listSessions(t, watcher, nil).Items); n != 0 {
				t.Errorf("another window lists %d sessions before any message", n)
			}

			// The first message: subscribe to the chat and, without waiting,
			// the turn.
			sub := c.Start("subscribe", map[string]any{"channel": chat})
			message := "  Fix   the\n build\tplease  "
			turnID := "request_6f1c2a90-5b7e-4c2a-9f1e-3d2b1a0c9e8d"
			c.Notify("dispatchAction", map[string]any{"channel": chat, "clientSeq": c.NextSeq(), "action": map[string]any{
				"type": "chat/turnStarted", "turnId": turnID, "startedAt": protocol.FormatTime(time.Now()),
				"message": map[string]any{"text": message, "origin": map[string]any{"kind": "user"}, "model": map[string]any{"id": "script"}},
			}})
			if _, err := sub.Await(); err != nil {
				t.Fatalf("subscribe to the chat: %v", err)
			}
			c.Wait("the turn's echo", func(msgs []hosttest.Message) bool { return len(echoes(msgs, chat)) > 0 })
			if e := echoes(c.Messages(), chat)[0]; e.RejectionReason != nil {
				t.Fatalf("the first message was refused: %s", *e.RejectionReason)
			}
			waitTurnEnd(t, c, chat, turnID)
			st := c.WaitState(session, "the title", func(s protocol.ChannelState) bool {
				return s.(*protocol.SessionState).Title == "Fix the build please"
			}).(*protocol.SessionState)
			if st.Lifecycle != protocol.SessionLifecycleReady {
				t.Errorf("lifecycle %s after the first turn", st.Lifecycle)
			}
			c.Dispatch(session, &protocol.SessionIsReadChangedAction{IsRead: true})
			c.WaitState(session, "read", func(s protocol.ChannelState) bool {
				return s.(*protocol.SessionState).Status&protocol.StatusIsRead != 0
			})

			// The row, the session's snapshot and the chat agree.
			row := findRow(t, listSessions(t, watcher, nil).Items, session)
			fresh := th.client("fresh")
			sessionSnap := fresh.Subscribe(session).State.(*protocol.SessionState)
			chatSnap := fresh.Subscribe(chat).State.(*protocol.ChatState)
			if row.Status != sessionSnap.Status || row.Status != chatSnap.Status || row.Status != protocol.StatusIdle|protocol.StatusIsRead {
				t.Errorf("status: row %d, session %d, chat %d; want all %d", row.Status, sessionSnap.Status, chatSnap.Status, protocol.StatusIdle|protocol.StatusIsRead)
			}
			if row.Title != "Fix the build please" || row.DefaultChat == nil || *row.DefaultChat != chat || len(row.Chats) != 1 || *row.Chats[0].Status != chatSnap.Status {
				t.Errorf("row = %+v", row)
			}

			// The window reloads: the connection drops, and its tools go
			// with it; the client reconnects without a channel.
			lastSeq := c.LastSeq()
			c.Close()
			fresh.WaitState(session, "the active client to go", func(s protocol.ChannelState) bool {
				return len(s.(*protocol.SessionState).ActiveClients) == 0
			})
			again := hosttest.Dial(t, th.url)
			if rr, ok := again.Resume(c, "vscode-1").(*protocol.ReconnectReplayResult); !ok || len(rr.Missing) != 0 || len(rr.Actions) == 0 {
				t.Errorf("reconnect without channel: %+v", rr)
			}
			if again.LastSeq() <= lastSeq {
				t.Errorf("the replay did not move the client on from %d", lastSeq)
			}
			// What it holds now is what a fresh client is given.
			agreeAll(t, th, again, protocol.RootURI, session, chat)

			// A client the host does not know starts again with initialize.
			stranger := hosttest.Dial(t, th.url)
			if _, err := stranger.Call("reconnect", map[string]any{"clientId": "never-seen", "lastSeenServerSeq": 1,
				"subscriptions": []string{protocol.RootURI}}); err == nil || err.Code != -32008 {
				t.Errorf("reconnect of an unknown client: %v, want -32008", err)
			}
			stranger.InitializeAt(tc.offered, "never-seen")
		})
	}
}

// vscodeSettings is the i-th of the root config bursts VS Code sends.
func vscodeSettings(i int) map[string]any {
	s := map[string]any{
		"http.proxy": "", "http.proxyStrictSSL": true, "telemetryLevel": "off",
		"terminalAutoApproveRules": map[string]any{"ls": true, "rm": false}, "chat.agent.maxRequests": 25,
	}
	for k := range 33 {
		s[fmt.Sprintf("setting%d", k+5)] = i
	}
	if i == 0 {
		s["showExternalSessions"] = "recent"
	}
	return s
}

// vscodeClient is the active client VS Code publishes, with n tools and a
// 1.0 plugin customization.
func vscodeClient(n int) map[string]any {
	tools := make([]map[string]any, n)
	for i := range tools {
		tools[i] = map[string]any{"name": fmt.Sprintf("tool%d", i), "description": "a client tool",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}
	}
	return map[string]any{"clientId": "vscode-1", "tools": tools, "customizations": []any{map[string]any{
		"type": "plugin", "id": "plugin-1", "uri": "file:///home/u/.vscode/agent-plugins/p1", "name": "P1", "nonce": "n1",
		"enablement":      []any{map[string]any{"kind": "global", "enabled": true}},
		"childEnablement": map[string]any{"lint": []any{map[string]any{"kind": "global", "enabled": false}}},
	}}}
}

// echoes returns the envelopes of the client's own actions on a channel.
func echoes(msgs []hosttest.Message, channel string) []*protocol.ActionEnvelope {
	var out []*protocol.ActionEnvelope
	for _, m := range msgs {
		if e := m.Envelope; e != nil && e.Channel == channel && e.Origin != nil {
			out = append(out, e)
		}
	}
	return out
}

func findRow(t *testing.T, rows []protocol.SessionSummary, uri string) protocol.SessionSummary {
	t.Helper()
	i := slices.IndexFunc(rows, func(r protocol.SessionSummary) bool { return r.Resource == uri })
	if i < 0 {
		raw, _ := json.Marshal(rows)
		t.Fatalf("%s is not listed: %s", uri, raw)
	}
	return rows[i]
}

// TestProvisionalSessionFollowsItsClient checks a session nobody sent a
// turn in is its creating client's across connections, and goes when the
// host forgets the client.
func TestProvisionalSessionFollowsItsClient(t *testing.T) {
	t.Parallel()
	th := startHost(t, "", func(o *host.Options) { o.ClientWindow = time.Hour })
	c := th.client("window-1")
	session, _ := th.newSession(c, "empty", nil)
	c.Close()
	// The creator, reconnected on a new connection, finds it; nobody
	// else does.
	back := hosttest.Dial(t, th.url)
	back.Resume(c, "window-1")
	back.Subscribe(session)
	other := th.client("window-2")
	if _, err := other.Call("subscribe", map[string]any{"channel": session}); err == nil || err.Code != -32001 {
		t.Errorf("another client subscribed to a provisional session: %v", err)
	}

	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	quick := startHost(t, "", func(o *host.Options) { o.ClientWindow, o.Clock = time.Second, clk })
	gone := quick.client("window-3")
	session, _ = quick.newSession(gone, "abandoned", nil)
	quick.leave(gone, "window-3")
	// The host forgets the client once it has been away its window: its
	// unused session goes with it. (Only the host sees it: to any other
	// client a provisional session is unknown.)
	quick.h.Balance()
	if st, err := quick.h.Status(session); err != nil || st != "active" {
		t.Errorf("the abandoned session went before its client's window ended: %s %v", st, err)
	}
	clk.Advance(time.Second)
	quick.h.Balance()
	if st, err := quick.h.Status(session); err == nil {
		t.Errorf("the abandoned session is still %s once its client is forgotten", st)
	}
	again := hosttest.Dial(t, quick.url)
	if _, err := again.Call("reconnect", map[string]any{"clientId": "window-3", "lastSeenServerSeq": 0, "subscriptions": []string{}}); err == nil || err.Code != -32008 {
		t.Errorf("reconnect of a forgotten client: %v, want -32008", err)
	}
}
