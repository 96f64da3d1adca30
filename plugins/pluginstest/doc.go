// Package pluginstest holds what the backends' tests share: a Turn that
// records what an agent reports, and process checks.
//
// It is for tests only; no backend imports it outside its tests.
package pluginstest
