package host

import (
	"context"
	"errors"
	"slices"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// initialize negotiates the protocol version and answers with snapshots of
// the channels the client subscribes to at once.
func (h *Host) initialize(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p protocol.InitializeParams
	if err := params(req, &p); err != nil {
		return nil, err
	}
	version, err := protocol.Negotiate(p.ProtocolVersions)
	var mv *protocol.MalformedVersionError
	switch {
	case errors.As(err, &mv):
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for initialize: protocolVersions: %v", err)
	case err != nil:
		// Nothing in common: the answer says what this host speaks, and
		// the connection ends once it is out.
		c.CloseAfter(req.ID(), "no protocol version in common")
		return nil, err
	}
	if err := checkClientID("initialize", p.ClientID); err != nil {
		return nil, err
	}
	if c.Initialized() {
		return nil, c.SetClient(p.ClientID, version) // refused: initialized once
	}
	if err := h.joinClient(c, p.ClientID, version); err != nil {
		return nil, err
	}
	if err := c.SetClient(p.ClientID, version); err != nil {
		h.leaveClient(p.ClientID)
		return nil, err
	}
	c.Log().Info("client connected", "client", p.ClientID, "version", version, "info", clientName(p.ClientInfo))

	res := protocol.InitializeResult{
		ProtocolVersion:  version,
		ServerSeq:        h.bus.Current(),
		ServerInfo:       &protocol.Implementation{Name: "ahpd", Version: new(h.opts.Version)},
		Snapshots:        []protocol.Snapshot{},
		DefaultDirectory: new(session.FileURI(h.opts.DefaultDirectory)),
		Automations:      h.automationCapabilities(),
	}
	for _, ch := range slices.Compact(slices.Clone(p.InitialSubscriptions)) {
		snap, err := h.attachRouted(ctx, c, ch, req.ID())
		if err != nil {
			// A channel that is gone is left out, as reconnect leaves it out.
			c.Log().Debug("initial subscription refused", "channel", ch, "err", err)
			continue
		}
		res.Snapshots = append(res.Snapshots, snap)
	}
	return res, nil
}

func clientName(info *protocol.Implementation) string {
	if info == nil {
		return ""
	}
	if info.Version != nil {
		return info.Name + " " + *info.Version
	}
	return info.Name
}

// checkClientID refuses an empty client id, and one too long to keep.
func checkClientID(method, id string) error {
	switch {
	case id == "":
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: clientId: must not be empty", method)
	case len(id) > maxClientID:
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: clientId: %d bytes, more than %d", method, len(id), maxClientID)
	}
	return nil
}

// reconnectParams are reconnect's params with channel optional: VS Code
// sends none, though the definitions require ahp-root://.
type reconnectParams struct {
	Channel           *string        `json:"channel"`
	ClientID          string         `json:"clientId"`
	LastSeenServerSeq int64          `json:"lastSeenServerSeq"`
	Subscriptions     []protocol.URI `json:"subscriptions"`
}

// reconnect resumes a client's subscriptions: the changes it missed when
// they are still held, else fresh snapshots. A client the host does not
// remember is -32008, and starts again with initialize.
func (h *Host) reconnect(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (any, error) {
	var p reconnectParams
	if err := jsonUnmarshal([]byte(req.ParamString()), &p); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for reconnect: %v", err)
	}
	if p.Channel != nil && *p.Channel != protocol.RootURI {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for reconnect: channel: must be %s", protocol.RootURI)
	}
	if err := checkClientID("reconnect", p.ClientID); err != nil {
		return nil, err
	}
	if c.Initialized() {
		return nil, c.SetClient(p.ClientID, "") // refused: initialized once
	}
	version, moved, err := h.rejoinClient(c, p.ClientID)
	if err != nil {
		return nil, err
	}
	if err := c.SetClient(p.ClientID, version); err != nil {
		h.leaveClient(p.ClientID)
		return nil, err
	}

	// Channels that still exist, and those that do not.
	var live []string
	missing := []protocol.URI{}
	for _, ch := range slices.Compact(slices.Clone(p.Subscriptions)) {
		if h.exists(c, ch) {
			live = append(live, ch)
		} else {
			missing = append(missing, ch)
		}
	}
	// Sessions past Limits.AttachedSessions are not resumed, as a
	// subscribe of them would be refused (too_many_attached).
	live, over := c.RoomFor(live)
	missing = append(missing, over...)
	release, replayable := h.holdMirrors(live)
	defer release()
	why := notReplayable
	if moved {
		why, replayable = movedHost, false
	}
	if replayable {
		// Attached first, at the last change numbered; what it missed up
		// to there is read once its lanes have sent it all (written down).
		upTo, ready := h.bus.Attach(c, live, req.ID())
		select {
		case <-ready:
		case <-ctx.Done():
			h.unsubscribeFrom(c, live)
			return nil, ctx.Err()
		}
		if actions, ok := h.bus.Missed(c, p.LastSeenServerSeq, upTo, live); ok {
			return &protocol.ReconnectReplayResult{Actions: actions, Missing: missing}, nil
		}
		var actions []protocol.ActionEnvelope
		if actions, why = h.replayFromJournal(ctx, c, p.LastSeenServerSeq, upTo, live); why == "" {
			// The host may have stopped since it took the client's last
			// actions: what the gap holds of them is taken.
			h.takenInGap(c, actions)
			return &protocol.ReconnectReplayResult{Actions: actions, Missing: missing}, nil
		}
	}
	// Snapshots, and the answer says why (attach.go).
	res := &protocol.ReconnectSnapshotResult{Snapshots: []protocol.Snapshot{}, Extra: reasonMeta(why)}
	for _, ch := range live {
		snap, err := h.attachRouted(ctx, c, ch, req.ID())
		if err != nil {
			continue
		}
		res.Snapshots = append(res.Snapshots, snap)
	}
	return res, nil
}
