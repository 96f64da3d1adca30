package main

import (
	"fmt"
	"reflect"
)

// budgetsConfig is what one person may hold at once on the daemon
// (config file only; docs/USERS.md, "Budgets"): a key left out, or 0,
// keeps its default. Root (the connection token, or everybody on a host
// without users) is held only to the host-wide bounds.
type budgetsConfig struct {
	// Connections are AHP WebSocket connections (host.Options).
	Connections int `yaml:"connections"`
	// EventStreams are the HTTP API's event streams (httpapi.Options).
	EventStreams int `yaml:"eventStreams"`
	// DashboardLogins are dashboard sign-ins; one past it ends the
	// person's own oldest (dashboard.Options).
	DashboardLogins int `yaml:"dashboardLogins"`
	// DashboardLivePages are live dashboard pages across the person's
	// logins (dashboard.Options).
	DashboardLivePages int `yaml:"dashboardLivePages"`
	// Automations are the automations a person may have
	// (host.AutomationOptions.MaxPerOwner).
	Automations int `yaml:"automations"`
	// WatchedFolders are the folders a person's file and git ref triggers
	// may watch, their share of the host's 4,096
	// (host.AutomationOptions.WatchShare).
	WatchedFolders int `yaml:"watchedFolders"`
}

// maxBudget bounds each budget: past it a budget is no bound at all.
const maxBudget = 100_000

// checkBudgets refuses a budget below zero or past maxBudget, naming it.
func checkBudgets(b budgetsConfig) error {
	v, t := reflect.ValueOf(b), reflect.TypeOf(b)
	for i := range t.NumField() {
		if n := v.Field(i).Int(); n < 0 || n > maxBudget {
			return fmt.Errorf("budgets.%s: %d is not between 0 (the default) and %d", t.Field(i).Tag.Get("yaml"), n, maxBudget)
		}
	}
	return nil
}
