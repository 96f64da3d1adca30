package host

import "github.com/ahpd/ahpd/host/conn"

// Limits bound what one connection may hold of the daemon (conn.Limits).
type Limits = conn.Limits

// The defaults of Limits, for the configuration to name.
const (
	DefaultAttached = conn.DefaultAttached
)
