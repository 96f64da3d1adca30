package plugins

import (
	"context"
	"errors"
)

// Checker is a Backend that can tell, before any conversation, whether it
// can run at all: its program is installed, its settings make sense. The
// host asks once at startup and lists a backend that fails as unavailable,
// with the error, rather than refusing to start.
type Checker interface {
	Check(ctx context.Context) error
}

// UnavailableError is a Start failure that is the backend's, not the
// conversation's: the agent's program is missing, exits before it speaks,
// or speaks another protocol. The host lists the backend as unavailable
// until a later Start succeeds.
type UnavailableError struct {
	Err error
}

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable marks err as the backend's own failure (see UnavailableError).
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &UnavailableError{Err: err}
}

// IsUnavailable reports whether err says the backend cannot run.
func IsUnavailable(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue)
}
