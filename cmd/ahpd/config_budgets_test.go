package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBudgetsConfig: the budgets section is read into the daemon's
// settings, a key left out is 0 (the default), and a budget out of range
// or unknown is refused naming it.
func TestBudgetsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       budgetsConfig
		err        string
	}{
		{"all", "budgets: {connections: 8, eventStreams: 4, dashboardLogins: 3, dashboardLivePages: 6, automations: 5, watchedFolders: 50}\n",
			budgetsConfig{Connections: 8, EventStreams: 4, DashboardLogins: 3, DashboardLivePages: 6, Automations: 5, WatchedFolders: 50}, ""},
		{"some", "budgets: {connections: 2}\n", budgetsConfig{Connections: 2}, ""},
		{"none", "", budgetsConfig{}, ""},
		{"negative", "budgets: {eventStreams: -1}\n", budgetsConfig{}, "budgets.eventStreams: -1 is not between 0"},
		{"too large", "budgets: {dashboardLogins: 1000000}\n", budgetsConfig{}, "budgets.dashboardLogins: 1000000 is not between 0"},
		{"unknown", "budgets: {conections: 2}\n", budgetsConfig{}, "conections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cfg, err := parseConfig([]string{"--config", writeConfig(t, e, tc.yaml), "--state-dir", e.state}, io.Discard)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case cfg.Budgets != tc.want:
				t.Fatalf("budgets %+v, want %+v", cfg.Budgets, tc.want)
			}
		})
	}
}

// TestConnectionsBudgetOfTheDaemon: budgets.connections holds a person to
// that many WebSocket connections on a running daemon: the next is HTTP
// 429; another person and root connect.
func TestConnectionsBudgetOfTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	users, mo, gus := moAndGus(t, e)
	p := serveDaemon(t, e, "--users", users, "--config", writeConfig(t, e, "budgets: {connections: 1}\n"))
	connect(t, p, mo, "mo-1")
	if code := handshake(t, p.url(mo), nil); code != http.StatusTooManyRequests {
		t.Errorf("mo's second connection: HTTP %d, want 429", code)
	}
	connect(t, p, gus, "gus-1")
	connect(t, p, e.token(t), "root-1")
	connect(t, p, e.token(t), "root-2")
}
