package host

import (
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
)

// operationsFor lists the operations of the grants table c's principal
// may do to a session owner owns, as ahpd/sessionStatus tells them: a
// client offers what the host would take (ahpd pending lists only the
// questions the caller may answer) without trying each.
func (h *Host) operationsFor(c *conn.Conn, owner grants.Principal) []string {
	var out []string
	for _, op := range grants.Operations() {
		if h.check(c, op, owner) == nil {
			out = append(out, string(op))
		}
	}
	return out
}
