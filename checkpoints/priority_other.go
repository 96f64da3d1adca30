//go:build !unix

package checkpoints

// lowerPriority does nothing where processes have no nice value.
func lowerPriority(int) {}
