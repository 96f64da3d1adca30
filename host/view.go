package host

import (
	"github.com/ahpd/ahpd/protocol"
)

// maxViewTurns bounds view.turns; a greater value is taken as it.
const maxViewTurns = 50

// viewTurns reads subscribe's view.turns: 0 when there is none, else
// from 1 to maxViewTurns. Servers may return more or fewer turns than
// asked, so more than maxViewTurns is taken as maxViewTurns; none or
// fewer than one is a mistake, refused.
func viewTurns(v *protocol.SubscribeView) (int, error) {
	if v == nil || v.Turns == nil {
		return 0, nil
	}
	if *v.Turns < 1 {
		return 0, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for subscribe: view.turns: %d, must be from 1 to %d", *v.Turns, maxViewTurns)
	}
	return int(min(*v.Turns, maxViewTurns)), nil
}
