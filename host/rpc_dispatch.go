package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/creachadair/jrpc2"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/retries"
	"github.com/ahpd/ahpd/protocol"
)

// dispatchParams are dispatchAction's params with the action kept whole, so
// an action that does not decode can still be echoed back refused.
type dispatchParams struct {
	Channel   string         `json:"channel"`
	ClientSeq int64          `json:"clientSeq"`
	Action    jsontext.Value `json:"action"`
}

// dispatchAction takes a client's action. An accepted action is applied
// and echoed to every subscriber with its origin; a refused one goes back
// to its sender alone with rejectionReason. An accepted action that
// changes nothing goes back to its sender alone, with the serverSeq
// unchanged.
func (h *Host) dispatchAction(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p dispatchParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil || p.Channel == "" || p.Action == nil {
		c.Log().Debug("dropping a malformed dispatchAction", "err", err)
		return nil, nil
	}
	if len(p.Channel) > protocol.MaxURIBytes() {
		// No channel has such a name: an action on a channel that does
		// not exist is ignored.
		c.Log().Debug("dropping a dispatchAction on an oversized channel", "bytes", len(p.Channel))
		return nil, nil
	}
	origin := &protocol.ActionOrigin{ClientID: c.Client(), ClientSeq: p.ClientSeq}
	a, err := protocol.UnmarshalAction(p.Action)
	if err != nil {
		h.refuse(c, p.Channel, echoable(p.Action), origin, "invalid action: "+err.Error())
		return nil, nil
	}
	// The grant is checked once the action is known to be a client's, and
	// before anything about the channel is said to somebody not allowed it.
	reason := checkType(a, c.Negotiated())
	if reason == "" {
		reason = h.checkAction(c, p.Channel, a)
	}
	if reason == "" && c.ReadOnlyFor(p.Channel) {
		reason = conn.ReadOnlyReason
	}
	if reason == "" && isAutomationChannel(p.Channel) {
		if !h.answeredAsTaken(c, p.Channel, a, origin) {
			h.dispatchAutomation(c, p.Channel, a, origin) // automations.go
		}
		return nil, nil
	}
	if reason == "" {
		reason = checkChannel(p.Channel, a)
	}
	if reason == "" {
		reason = h.actionRootsRefusal(c, a)
	}
	if reason != "" {
		h.refuse(c, p.Channel, a, origin, reason)
		return nil, nil
	}
	ch, err := h.resolve(c, p.Channel)
	if err != nil {
		return nil, nil // a channel that does not exist: ignored, as the protocol says
	}
	if !h.answeredAsTaken(c, p.Channel, a, origin) {
		ch.dispatch(c, a, origin)
	}
	return nil, nil
}

// answeredAsTaken claims the action's clientSeq for this dispatch (package
// retries), or, when the client's action of that clientSeq was taken
// before, answers it as taken and reports true: the same action is echoed
// again, changing nothing, and another one is refused. A refusal of the
// dispatch lets the claim go (Host.actionRefused).
func (h *Host) answeredAsTaken(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin) bool {
	if origin.ClientSeq == 0 || origin.ClientID == "" {
		return false
	}
	data, err := json.Marshal(a)
	if err != nil {
		return false
	}
	switch h.taken.Claim(origin.ClientID, c.Numbering(), origin.ClientSeq, h.taken.Digest(channel, data), origin) {
	case retries.Repeat:
		c.Log().Debug("a client sent an action again that was taken: echoed, not applied", "channel", channel, "clientSeq", origin.ClientSeq)
		h.metrics.repeats.Add(1)
		h.bus.Echo(c, channel, a, origin, "")
		return true
	case retries.Reused:
		h.refuse(c, channel, a, origin, fmt.Sprintf("clientSeq %d was taken for another action of this client: each action needs a clientSeq of its own", origin.ClientSeq))
		return true
	}
	return false
}

// actionRefused lets go of the claim of a client action refused: nothing of
// it was applied, so the client may send it again (the bus's OnRefused).
func (h *Host) actionRefused(origin *protocol.ActionOrigin) {
	h.taken.Release(origin.ClientID, origin.ClientSeq, origin)
}

// takenInJournal marks as taken the client actions of envelopes read back
// from the journal (a session read back: numbering 0, each client's
// newest): what the host took before it stopped is not taken again when a
// client resends it.
func (h *Host) takenInJournal(envs []protocol.ActionEnvelope) {
	for i := range envs {
		if o := envs[i].Origin; o != nil {
			h.taken.Mark(o.ClientID, 0, o.ClientSeq, envs[i].ServerSeq)
		}
	}
}

// takenInGap marks as taken c's client's actions of the gap it was
// replayed, in the numbering c carries on.
func (h *Host) takenInGap(c *conn.Conn, envs []protocol.ActionEnvelope) {
	for i := range envs {
		if o := envs[i].Origin; o != nil && o.ClientID == c.Client() {
			h.taken.Mark(o.ClientID, c.Numbering(), o.ClientSeq, envs[i].ServerSeq)
		}
	}
}

// notOffered names the channels of actions this host does not take yet,
// with what a person would call them.
var notOffered = map[string]string{
	"canvas": "canvases",
}

// maxEchoedAction bounds the action a refusal carries back: a larger one
// is sent back as its type alone.
const maxEchoedAction = 64 << 10

// echoable is what a refusal of an action that does not decode carries.
func echoable(raw jsontext.Value) *protocol.Unknown {
	if len(raw) <= maxEchoedAction {
		return &protocol.Unknown{Raw: raw}
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = jsonUnmarshal(raw, &head)
	if len(head.Type) > 256 {
		head.Type = ""
	}
	stub, _ := json.Marshal(head)
	return &protocol.Unknown{Kind: head.Type, Raw: stub}
}

// checkType refuses actions no client may send, and those the protocol
// version the connection speaks does not have.
func checkType(a protocol.Action, version string) string {
	t := a.Type()
	if _, known := t.IntroducedIn(); !known {
		return fmt.Sprintf("unknown action type %s", protocol.Quote(string(t)))
	}
	if !t.ClientDispatchable() {
		return fmt.Sprintf("%s is the host's to send, not a client's", t)
	}
	if version != "" && !t.KnownTo(version) {
		since, _ := t.IntroducedIn()
		return fmt.Sprintf("%s came with protocol %s; this connection speaks %s", t, since, version)
	}
	if what, ok := notOffered[t.Channel()]; ok {
		return fmt.Sprintf("this host does not offer %s", what)
	}
	return ""
}

// checkChannel refuses an action sent on a channel it does not belong on.
func checkChannel(channel string, a protocol.Action) string {
	t := a.Type()
	kind, err := protocol.ClassifyChannel(channel)
	if err != nil {
		return err.Error()
	}
	if kind == protocol.ChannelTerminal {
		return "this host does not offer terminals"
	}
	want := map[protocol.ChannelKind]string{
		protocol.ChannelRoot: "root", protocol.ChannelSession: "session", protocol.ChannelChat: "chat",
	}[kind]
	if want == "" || t.Channel() != want {
		return fmt.Sprintf("%s does not belong on channel %s", t, channel)
	}
	return ""
}

func (h *Host) refuse(c *conn.Conn, channel string, a protocol.Action, origin *protocol.ActionOrigin, reason string) {
	reason = boundedMessage(reason)
	c.Log().Debug("refused a client action", "channel", channel, "reason", reason)
	h.bus.Echo(c, channel, a, origin, reason)
}

func (h *Host) dispatchRoot(c *conn.Conn, a protocol.Action, origin *protocol.ActionOrigin) {
	h.rootMu.Lock()
	if cc, ok := a.(*protocol.RootConfigChangedAction); ok {
		kept, reason := h.rootConfigChange(cc)
		if reason != "" {
			h.unlockRoot()
			h.bus.Echo(c, protocol.RootURI, a, origin, reason)
			return
		}
		a = kept
	}
	changed := h.applyRootLocked(a, origin)
	h.unlockRoot()
	if !changed {
		h.bus.Echo(c, protocol.RootURI, a, origin, "")
		return
	}
	h.modeChanged()
	h.hostRulesChanged()
}
