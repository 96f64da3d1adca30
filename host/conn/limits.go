package conn

import (
	"fmt"
	"time"
)

// Limits bound what one connection may hold of the daemon: every size and
// count a client controls, and how long it may stay silent. A zero field
// takes its default; a negative duration turns that deadline off.
// docs/HOST.md lists them with their defaults.
type Limits struct {
	// MessageBytes bounds one incoming message: a prompt with attachments
	// fits. A longer one ends the connection (1009).
	MessageBytes int
	// CommandBytes bounds a message of any method but those that carry
	// content (dispatchAction, createSession, createChat): a subscribe
	// has no use for megabytes, and is answered -32600 without being
	// decoded.
	CommandBytes int
	// QueuedBytes and QueuedMessages bound a connection's outbound queue.
	// A client further behind is cut (1008) and catches up on reconnect.
	QueuedBytes    int
	QueuedMessages int
	// InFlight bounds the requests of a connection taken and not yet
	// answered: past it, ahpd reads no more of the connection until one
	// is answered. A batch may not hold more.
	InFlight int
	// Subscriptions bounds the channels one connection watches.
	Subscriptions int
	// AttachedSessions bounds the sessions one connection watches (its
	// chats, root and automations do not count): past it, subscribe is
	// refused with reason too_many_attached (client.go).
	AttachedSessions int
	// IdentifierBytes bounds a URI or an id in anything a client sends,
	// checked as it is decoded (protocol.SetIdentifierLimits): 0 keeps
	// protocol.DefaultMaxIdentifier. Decoding is the protocol package's,
	// so the bound is the whole process's.
	IdentifierBytes int
	// Handshake bounds the WebSocket upgrade: the HTTP request's headers
	// must arrive within it.
	Handshake time.Duration
	// Initialize is how long a connection may go without initialize (or
	// reconnect) answered.
	Initialize time.Duration
	// Idle is how long a connection may go without a word from the
	// client: a message or the answer to a WebSocket ping, which ahpd
	// sends once half of it has gone by, so a quiet client that is alive
	// stays. It finds peers whose network is gone.
	Idle time.Duration
	// Lifetime, when set, ends every connection that old; clients
	// reconnect. Off by default.
	Lifetime time.Duration
}

// Defaults of Limits.
const (
	DefaultMessageBytes   = 32 << 20
	DefaultCommandBytes   = 1 << 20
	DefaultQueuedBytes    = 64 << 20
	DefaultQueuedMessages = 16384
	DefaultInFlight       = 256
	DefaultSubscriptions  = 4096
	DefaultAttached       = 20
	DefaultHandshake      = 10 * time.Second
	DefaultInitialize     = 30 * time.Second
	DefaultIdle           = 5 * time.Minute
)

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MessageBytes, DefaultMessageBytes)
	set(&l.CommandBytes, DefaultCommandBytes)
	set(&l.QueuedBytes, DefaultQueuedBytes)
	set(&l.QueuedMessages, DefaultQueuedMessages)
	set(&l.InFlight, DefaultInFlight)
	set(&l.Subscriptions, DefaultSubscriptions)
	set(&l.AttachedSessions, DefaultAttached)
	l.CommandBytes = min(l.CommandBytes, l.MessageBytes)
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setD(&l.Handshake, DefaultHandshake)
	setD(&l.Initialize, DefaultInitialize)
	setD(&l.Idle, DefaultIdle)
	return l
}

// Validate says what is wrong with l, for a person to fix.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"message bytes", l.MessageBytes}, {"command bytes", l.CommandBytes},
		{"queued bytes", l.QueuedBytes}, {"queued messages", l.QueuedMessages},
		{"in-flight requests", l.InFlight}, {"subscriptions", l.Subscriptions},
		{"attached sessions", l.AttachedSessions}, {"identifier bytes", l.IdentifierBytes},
	} {
		if f.v < 0 {
			return fmt.Errorf("the connection limit of %s is %d: it must be positive (0 takes the default)", f.name, f.v)
		}
	}
	if l.MessageBytes > 0 && l.MessageBytes < 64<<10 {
		return fmt.Errorf("the connection limit of message bytes is %d: at least 65536, or a prompt does not fit", l.MessageBytes)
	}
	return nil
}

// on reports whether a deadline is set.
func on(d time.Duration) bool { return d > 0 }

// CloseCode is how a connection ended, as a WebSocket close code; stdio
// has no codes and only closes.
type CloseCode int

// The close codes ahpd ends connections with (RFC 6455, 7.4.1).
const (
	CloseNormal      CloseCode = 1000 // the peer closed, or ahpd shut down
	CloseUnsupported CloseCode = 1003 // a binary frame
	ClosePolicy      CloseCode = 1008 // a deadline passed, or the client fell too far behind
	CloseTooBig      CloseCode = 1009 // a message over MessageBytes
	CloseInternal    CloseCode = 1011 // the transport failed
)

// Why a connection was cut, as Config.OnCut is told.
const (
	CutSlow      = "slow"       // its outbound queue overflowed
	CutStalled   = "stalled"    // a write took longer than writeTimeout
	CutDeadline  = "deadline"   // initialize, idle or lifetime deadline
	CutViolation = "violation"  // a binary frame, a message too big
	CutRevoked   = "revoked"    // its token no longer lets it in (the host's)
	CutWrite     = "write"      // a write failed
	CutShutdown  = "unfinished" // it did not finish in time at shutdown (the host's)
)

// CutReasons are the reasons, for a metric to name.
var CutReasons = []string{CutSlow, CutStalled, CutDeadline, CutViolation, CutRevoked, CutWrite, CutShutdown}

// TooFarBehind is the word the close reason of a client cut for falling
// behind starts with: the one a reconnect past what the host keeps is
// told.
const TooFarBehind = "too_far_behind"
