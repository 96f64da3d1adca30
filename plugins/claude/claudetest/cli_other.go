//go:build !unix

package claudetest

// lockFile takes no lock where there is no flock: installs at once may
// collide there, each in its own directory, and the last rename wins.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
