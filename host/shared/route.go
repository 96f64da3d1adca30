package shared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Routing a request on a host that shares sessions (docs/CLUSTER.md).
// Every command about one session, and every client action on one, runs
// on the host holding the session. Before such a request's handler runs,
// Route asks who holds it:
//
//   - this host: the handler runs here;
//   - another host: the request is forwarded to it (forwarded.go) and its
//     answer returned as this host's;
//   - nobody: this host takes the session when its folders are within
//     its reach, and the handler runs here; otherwise the request goes to
//     the host placement chooses, which takes it.
//
// A request forwarded here is never forwarded on: it runs here, taking
// the session if nobody holds it, or fails naming the host that does.

// routed are the methods that run where their channel's session is held.
// Reads that need no running session (listings, the journal's timeline
// and replay, the status probe) are answered by any host.
var routed = map[string]bool{
	"dispatchAction":          true,
	"subscribe":               true,
	"createSession":           true,
	"createChat":              true,
	"disposeSession":          true,
	"disposeChat":             true,
	"fetchTurns":              true,
	"moveChat":                true,
	"ahpd/suspendSession":     true,
	"ahpd/resumeSession":      true,
	"ahpd/setSessionMetadata": true,
	"ahpd/sessionCheckpoints": true,
	"ahpd/sessionDiff":        true,
	"ahpd/sessionStatus":      true,
}

// hostLocal are the methods the host a connection is on answers itself,
// clustered or not, with why that is right. Every method of the host's
// table is routed or here (the host's TestEveryMethodRoutedOrLocal), so a
// new one cannot be left to run on a host that does not hold its session
// unawares.
var hostLocal = map[string]string{
	"initialize":                       "the connection's own",
	"ping":                             "the connection's own",
	"reconnect":                        "the connection's own",
	"unsubscribe":                      "the connection's own subscriptions, those a holder serves included",
	"listSessions":                     "the cluster's records and this host's catalogue, which every host reads",
	"resolveSessionConfig":             "a backend's schema, the same on every host",
	"sessionConfigCompletions":         "a backend's schema, the same on every host",
	"ahpd/sessionEvents":               "the shared journal, which every host reads",
	"ahpd/replaySession":               "the shared journal, which every host reads",
	"ahpd/sessionEventCounts":          "the shared journal, which every host reads",
	"ahpd/webhookLog":                  "this host's own deliveries",
	"listAutomationTriggerDefinitions": "the engine's triggers, the same on every host",
	"runAutomation":                    "a manual run runs on the host asked (CLUSTER.md)",
	"fetchAutomationRuns":              "the runs this host made",
}

// asked are the routed methods that only read: they go to the session's
// holder when it has one, and are answered here when nobody holds it,
// taking nothing.
var asked = map[string]bool{
	"ahpd/sessionStatus":      true,
	"ahpd/sessionCheckpoints": true,
	"ahpd/sessionDiff":        true,
}

// Routed reports whether a method runs where its channel's session is
// held.
func Routed(method string) bool { return routed[method] }

// HostLocal says why the host a connection is on answers a method itself,
// clustered or not; "" for a method it does not.
func HostLocal(method string) string { return hostLocal[method] }

// RouteTable lists the methods each table names (routed, hostLocal, and
// asked: the routed methods that only read), for a test against the
// host's method table.
func RouteTable() map[string][]string {
	return map[string][]string{
		"routed":    slices.Collect(maps.Keys(routed)),
		"hostLocal": slices.Collect(maps.Keys(hostLocal)),
		"asked":     slices.Collect(maps.Keys(asked)),
	}
}

// channelParam is the member every routed method names its channel with.
type channelParam struct {
	Channel            string   `json:"channel"`
	WorkingDirectories []string `json:"workingDirectories"`
}

// Route runs before a method's handler. It reports whether it answered
// the request itself (forwarded), with what.
func (p *Part) Route(ctx context.Context, c *conn.Conn, req *jrpc2.Request) (bool, any, error) {
	if !routed[req.Method()] {
		return false, nil, nil
	}
	var cp channelParam
	if json.Unmarshal([]byte(req.ParamString()), &cp) != nil || cp.Channel == "" {
		return false, nil, nil // the handler says what is wrong with it
	}
	id, uri := p.core.SessionOfChannel(cp.Channel)
	if id == "" {
		return false, nil, nil
	}
	if req.Method() != "createSession" {
		p.learnRecord(ctx, id)
	}
	var dead, tried []string // hosts placement chose that did not answer (twice, once)
	for {
		holder, placed, err := p.where(ctx, c, req.Method(), id, cp, dead)
		if err != nil {
			c.Log().Debug("could not route a request", "method", req.Method(), "session", id, "err", err)
			return true, nil, p.routeFailed(c, req, cp.Channel, err)
		}
		if holder == "" || holder == p.hostID() {
			return false, nil, nil
		}
		if req.Method() == "subscribe" {
			var sp protocol.SubscribeParams
			if err := p.core.DecodeParams(req, &sp); err != nil {
				return true, nil, err
			}
			v, err := p.subscribeRemote(ctx, c, holder, id, uri, &sp, req.ID())
			return true, v, err
		}
		c.Log().Debug("forwarding a request", "method", req.Method(), "session", id, "host", holder)
		v, err := p.forward(ctx, c, holder, req)
		if placed && errors.Is(err, errUnreachable) && len(dead) < maxPlacements {
			// Gone, its record not expired yet; or just started, its
			// answering not known across the cluster yet: asked once more
			// after a moment, then passed over.
			if !slices.Contains(tried, holder) && pause(ctx, placementRetry) {
				tried = append(tried, holder)
				continue
			}
			dead = append(dead, holder)
			continue
		}
		if err != nil {
			return true, nil, p.routeFailed(c, req, cp.Channel, err)
		}
		return true, v, nil
	}
}

// maxPlacements bounds the hosts a request is placed on in turn when the
// chosen one does not answer; placementRetry is how long it waits before
// asking a host that did not answer once more.
const (
	maxPlacements  = 3
	placementRetry = 200 * time.Millisecond
)

// pause waits d, and reports false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errUnreachable is a host that did not answer a forwarded request.
var errUnreachable = errors.New("the host does not answer")

// where says which host a request about session id runs on: its holder,
// or, when nobody holds it, this host (taking it) or the one placement
// chooses (placed), leaving out the hosts in dead. A request forwarded
// here runs here or fails.
func (p *Part) where(ctx context.Context, c *conn.Conn, method, id string, cp channelParam, dead []string) (holder string, placed bool, err error) {
	holder, err = p.holderOf(ctx, id)
	if err == nil && holder == "" && !asked[method] {
		holder, err = p.takeOrPlace(ctx, c, method, id, cp, dead)
		placed = true
	}
	if err == nil && holder != "" && holder != p.hostID() && c.ForwardedFrom() != "" {
		err = protocol.Errorf(protocol.CodeInternalError, "session %s moved to host %s meanwhile; send the request again", id, holder)
	}
	return holder, placed, err
}

// routeFailed answers a request that could not reach its session's host.
// A client's action is refused, as the host would refuse it: a client
// sends it as a notification, and would not learn of an error.
func (p *Part) routeFailed(c *conn.Conn, req *jrpc2.Request, channel string, err error) error {
	if req.Method() != "dispatchAction" {
		return err
	}
	reason := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		reason = pe.Message
	}
	p.core.RefuseAction(c, channel, []byte(req.ParamString()), reason)
	return nil
}

// takeOrPlace decides where a session nobody holds runs: here (taken),
// or on the host named. A session this host knows nothing of, and that no
// host holds, is left to the handler (createSession makes it; anything
// else answers that there is no such session).
func (p *Part) takeOrPlace(ctx context.Context, c *conn.Conn, method, id string, cp channelParam, dead []string) (string, error) {
	folders, known := p.foldersOf(id)
	if method == "createSession" {
		folders, known = dirsOf(cp.WorkingDirectories), true
	}
	if !known {
		return "", nil
	}
	if c.ForwardedFrom() == "" {
		where, err := p.placeFor(ctx, folders, dead)
		if errors.Is(err, cluster.ErrNoHost) {
			return "", protocol.Errorf(protocol.CodeInternalError, "no host of the cluster reaches the session's folders (labels repos=)")
		}
		if err != nil {
			return "", protocol.Errorf(protocol.CodeInternalError, "could not place session %s: %v", id, err)
		}
		if where != p.hostID() {
			return where, nil
		}
	}
	return p.claim(ctx, id)
}

// learnRecord reads the record of a session this host does not know from
// the cluster, and takes it as a change another host made, before a
// request for it is routed: a client that made a session on one host and
// asks another about it at once must not be told there is no such
// session because the record has not come through this host's watch yet
// (the watch brings the same record later, and older ones, which are
// passed over: recordChanged).
func (p *Part) learnRecord(ctx context.Context, id string) {
	if p.core.Session(id) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	data, rev, ok, err := p.member.Record(ctx, id)
	if err != nil || !ok {
		return
	}
	rec, err := session.DecodeRecord(data)
	if err != nil || idOf(rec.URI) != id {
		return
	}
	p.recordChanged(rec, rev)
	// A removal the watch brought between the read and now found nothing
	// to remove: asked again, the bucket says so.
	if _, _, still, err := p.member.Record(ctx, id); err == nil && !still {
		p.recordRemoved(id)
	}
}

// foldersOf returns the folders of a session this host has a record of.
func (p *Part) foldersOf(id string) ([]string, bool) {
	s := p.core.Session(id)
	if s == nil {
		return nil, false
	}
	return s.WorkingDirs(), true
}

// dirsOf turns createSession's folder URIs into paths, leaving out what
// is not one (the handler refuses it).
func dirsOf(uris []string) []string {
	var out []string
	for _, u := range uris {
		if d, err := session.DirOf(u); err == nil {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// forwardedRequest is a request forwarded to the host holding its
// session: the request, and the connection it came on as that host needs
// to act for it.
type forwardedRequest struct {
	From      string          `json:"from"`
	Conn      int64           `json:"conn"`
	Principal string          `json:"principal"`
	Client    string          `json:"client"`
	Version   string          `json:"version"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params,omitempty"`
}

// forwardedReply is the holder's answer: the result or the error. What
// else the holder sends the connection (an action refused) comes as a
// note (forwarded.go).
type forwardedReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *forwardedError `json:"error,omitempty"`
}

type forwardedError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// forward sends a request to the host holding its session and answers as
// it does.
func (p *Part) forward(ctx context.Context, c *conn.Conn, holder string, req *jrpc2.Request) (any, error) {
	var params json.RawMessage
	if ps := req.ParamString(); ps != "" {
		params = json.RawMessage(ps)
	}
	return p.forwardCall(ctx, c, holder, req.Method(), params)
}

// forwardCall sends one request of c's to the host holding its session
// and answers as that host does.
func (p *Part) forwardCall(ctx context.Context, c *conn.Conn, holder, method string, params json.RawMessage) (any, error) {
	fr := forwardedRequest{
		From: p.hostID(), Conn: c.ID(), Principal: c.Principal().String(), Client: c.Client(),
		Version: c.Negotiated(), Method: method, Params: params,
	}
	data, err := json.Marshal(fr)
	if err != nil {
		return nil, fmt.Errorf("encoding a forwarded request: %w", err)
	}
	c.NoteForwardedTo(holder)
	out, err := p.member.Request(ctx, holder, data)
	switch {
	case errors.Is(err, cluster.ErrNoResponder), errors.Is(err, cluster.ErrTimeout):
		return nil, fmt.Errorf("%w: %w", &protocol.Error{Code: protocol.CodeInternalError,
			Message: "host " + holder + ", which runs the session, does not answer; if it is gone, the session moves to another host once its lease runs out"}, errUnreachable)
	case errors.Is(err, cluster.ErrTooLarge):
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "the request is too large to forward to host %s", holder)
	case err != nil:
		return nil, protocol.Errorf(protocol.CodeInternalError, "forwarding to host %s: %v", holder, err)
	}
	var rep forwardedReply
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "host %s answered what is not a reply", holder)
	}
	if rep.Error != nil {
		e := &protocol.Error{Code: protocol.ErrorCode(rep.Error.Code), Message: rep.Error.Message}
		if len(rep.Error.Data) > 0 {
			e.Data = rep.Error.Data
		}
		return nil, e
	}
	if len(rep.Result) == 0 {
		return nil, nil
	}
	return json.RawMessage(rep.Result), nil
}

// takeNotes passes on to c what the holder sent its side of c: actions
// sent to the sender alone (refused, or accepted and changing nothing),
// numbered here.
func (p *Part) takeNotes(c *conn.Conn, notes []json.RawMessage) {
	for _, n := range notes {
		var msg struct {
			Method string                  `json:"method"`
			Params protocol.ActionEnvelope `json:"params"`
		}
		if err := json.Unmarshal(n, &msg); err != nil || msg.Method != "action" {
			continue
		}
		env := msg.Params
		reason := ""
		if env.RejectionReason != nil {
			reason = *env.RejectionReason
		}
		p.core.Bus().Echo(c, env.Channel, env.Action, env.Origin, reason)
	}
}
