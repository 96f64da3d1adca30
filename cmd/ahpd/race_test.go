//go:build race

package main

// The daemon under test is built with the race detector when the tests
// run with it, so that a race in ahpd fails the test that provoked it.
func init() { raceEnabled = true }
