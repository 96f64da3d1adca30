package host

import (
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
)

// operationsFor lists the operations of the grants table c's principal
// may do to the session t, as ahpd/sessionStatus tells them: a
// client offers what the host would take (ahpd pending lists only the
// questions the caller may answer) without trying each.
func (h *Host) operationsFor(c *conn.Conn, t grants.Target) []string {
	var out []string
	for _, op := range grants.Operations() {
		if h.check(c, op, t) == nil {
			out = append(out, string(op))
		}
	}
	return out
}
