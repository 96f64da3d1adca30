package cluster

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// Notes are one-way messages to a host: what a host serving forwarded
// requests sends back to the host they came from outside any reply (an
// action refused after the reply went, say). A note is fire and forget:
// core NATS, no acknowledgement, lost when its host is gone; notes from one
// host to another arrive in the order they were sent.

// NoteSubject is the subject host id takes notes on.
func (m *Member) NoteSubject(id string) string { return m.Subject(id) + ".note" }

// Note sends data to host id. It fails only when the member is closed,
// the id is not one, or data is over MaxMessageBytes; nobody listening is
// not an error.
func (m *Member) Note(id string, data []byte) error {
	if err := m.check(); err != nil {
		return err
	}
	if !nameRE.MatchString(id) {
		return fmt.Errorf("%w: host id must be 1 to 64 letters, digits, '-' or '_'", ErrBadName)
	}
	if len(data) > m.maxMsg {
		return fmt.Errorf("%w: note of %d bytes, at most %d", ErrTooLarge, len(data), m.maxMsg)
	}
	if err := m.nc.Publish(m.NoteSubject(id), data); err != nil {
		return fmt.Errorf("cluster: note to host %s: %w", id, err)
	}
	return nil
}

// ServeNotes hands every note sent to this host to fn, one at a time in
// the order they arrive, until Close. fn must not block for long: it holds
// up the notes after it.
func (m *Member) ServeNotes(fn func(data []byte)) error {
	if fn == nil {
		return fmt.Errorf("%w: nil note handler", ErrBadConfig)
	}
	sub, err := m.nc.Subscribe(m.NoteSubject(m.cfg.HostID), func(msg *nats.Msg) { fn(msg.Data) })
	if err != nil {
		return fmt.Errorf("cluster: taking notes: %w", err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		_ = sub.Unsubscribe()
		return ErrClosed
	}
	m.subs = append(m.subs, sub)
	m.mu.Unlock()
	if err := m.nc.Flush(); err != nil {
		return fmt.Errorf("cluster: taking notes: %w", err)
	}
	return nil
}
