package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// automationRunner runs an automation's run as its owner: over a
// connection of the host's own, acting for the owner, it creates the
// session, subscribes to its chat and starts the turn, exactly as a
// client of theirs would. So every grant and root is checked as if they
// had sent the message, and the run is seen by every client like any
// other session.
type automationRunner struct{ h *Host }

// Run implements automations.Runner.
func (r automationRunner) Run(ctx context.Context, req automations.RunRequest) automations.Outcome {
	h := r.h
	p := h.opts.Auth.Root()
	if req.Owner != "" {
		var err error
		if p, err = grants.Parse(req.Owner); err != nil {
			return automations.Outcome{Err: fmt.Errorf("the automation's owner %s is not a principal: %w", protocol.Quote(req.Owner), err)}
		}
	}
	lc, err := h.dialSelf(p)
	if err != nil {
		return automations.Outcome{Err: err}
	}
	defer lc.close()
	if _, err := lc.call(ctx, "initialize", map[string]any{"channel": protocol.RootURI, "protocolVersions": []string{"1.0.0"}, "clientId": "ahpd-automation-" + newAutomationID()}); err != nil {
		return automations.Outcome{Err: err}
	}
	tmpl := req.Definition.Session
	provider := ""
	if tmpl.Provider != nil {
		provider = *tmpl.Provider
	} else if ps := h.opts.Backends.Providers(); len(ps) > 0 {
		provider = ps[0]
	}
	session := protocol.NewSessionURI(newAutomationID()).String()
	create := protocol.CreateSessionParams{Channel: session, Provider: &provider, WorkingDirectories: tmpl.WorkingDirectories, Config: tmpl.Config}
	if _, err := lc.call(ctx, "createSession", create); err != nil {
		return automations.Outcome{Err: fmt.Errorf("create the run's session: %w", err)}
	}
	req.SessionCreated(session)
	chat := protocol.DefaultChatURI(session)
	if _, err := lc.call(ctx, "subscribe", map[string]any{"channel": chat}); err != nil {
		return automations.Outcome{Err: fmt.Errorf("watch the run's chat: %w", err)}
	}
	turnID := "automation-" + newAutomationID()
	msg := req.Definition.Message
	started := time.Now()
	lc.dispatch(chat, &protocol.ChatTurnStartedAction{TurnID: turnID, StartedAt: protocol.FormatTime(h.now()), Message: msg})
	for {
		select {
		case <-ctx.Done():
			lc.dispatch(chat, &protocol.ChatTurnCancelledAction{TurnID: turnID, Duration: time.Since(started).Milliseconds()})
			// The turn is given a moment to say it ended; the run is
			// cancelled either way.
			lc.waitEnd(turnID, time.Second)
			return automations.Outcome{Err: context.Cause(ctx)}
		case env, ok := <-lc.actions:
			if !ok {
				return automations.Outcome{Err: errors.New("the host closed the run's connection")}
			}
			if env.RejectionReason != nil && env.Origin != nil {
				return automations.Outcome{Err: fmt.Errorf("the message was refused: %s", *env.RejectionReason)}
			}
			if done, err := turnEnd(env.Action, turnID); done {
				return automations.Outcome{Err: err}
			}
		}
	}
}

// turnEnd says whether a is the end of turn id, and how it ended.
func turnEnd(a protocol.Action, id string) (bool, error) {
	switch a := a.(type) {
	case *protocol.ChatTurnCompleteAction:
		return a.TurnID == id, nil
	case *protocol.ChatTurnCancelledAction:
		return a.TurnID == id, errors.New("the turn was cancelled")
	case *protocol.ChatErrorAction:
		return a.TurnID == id, fmt.Errorf("the turn failed: %s", a.Part.Error.Message)
	}
	return false, nil
}

// selfConn is the runner's end of a connection of the host's own: JSON-RPC
// lines over a pair of pipes.
type selfConn struct {
	c       *conn
	w       *io.PipeWriter // to the host
	r       *io.PipeReader // from the host
	mu      sync.Mutex
	next    int
	waiting map[string]chan json.RawMessage
	actions chan protocol.ActionEnvelope
	done    chan struct{}
}

// dialSelf opens a connection to the host acting for p.
func (h *Host) dialSelf(p grants.Principal) (*selfConn, error) {
	toHostR, toHostW := io.Pipe()
	fromHostR, fromHostW := io.Pipe()
	t := &stdioTransport{r: bufio.NewReaderSize(toHostR, 64<<10), w: fromHostW, limit: h.opts.Limits.MessageBytes}
	c, err := h.newConnection(t, true, p)
	if err != nil {
		return nil, err
	}
	go h.serve(c)
	lc := &selfConn{c: c, w: toHostW, r: fromHostR, waiting: map[string]chan json.RawMessage{},
		actions: make(chan protocol.ActionEnvelope, 1024), done: make(chan struct{})}
	go lc.read()
	return lc, nil
}

func (lc *selfConn) read() {
	defer close(lc.done)
	defer close(lc.actions)
	sc := bufio.NewScanner(lc.r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Method == "action" {
			var env protocol.ActionEnvelope
			if jsonUnmarshal(m.Params, &env) == nil {
				select {
				case lc.actions <- env:
				default: // the runner looks only for its turn's end, which comes last
				}
			}
			continue
		}
		lc.mu.Lock()
		ch := lc.waiting[string(m.ID)]
		delete(lc.waiting, string(m.ID))
		lc.mu.Unlock()
		if ch == nil {
			continue
		}
		if m.Error != nil {
			b, _ := json.Marshal(map[string]string{"error": m.Error.Message})
			ch <- b
		} else {
			ch <- m.Result
		}
	}
}

func (lc *selfConn) send(id *int, method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": json.RawMessage(p)}
	if id != nil {
		msg["id"] = *id
	}
	b, _ := json.Marshal(msg)
	_, err = lc.w.Write(append(b, '\n'))
	return err
}

// call sends a request and waits for its answer.
func (lc *selfConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	lc.mu.Lock()
	lc.next++
	id := lc.next
	ch := make(chan json.RawMessage, 1)
	lc.waiting[strconv.Itoa(id)] = ch
	lc.mu.Unlock()
	if err := lc.send(&id, method, params); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case res := <-ch:
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(res, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s: %s", method, e.Error)
		}
		return res, nil
	case <-lc.done:
		return nil, fmt.Errorf("%s: the host closed the connection", method)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

var selfSeq sync.Mutex
var selfClientSeq int64

// dispatch sends a client action.
func (lc *selfConn) dispatch(channel string, a protocol.Action) {
	selfSeq.Lock()
	selfClientSeq++
	seq := selfClientSeq
	selfSeq.Unlock()
	raw, _ := json.Marshal(a)
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)
	t, _ := json.Marshal(string(a.Type()))
	obj["type"] = t
	_ = lc.send(nil, "dispatchAction", map[string]any{"channel": channel, "clientSeq": seq, "action": obj})
}

// waitEnd waits up to d for turn id to end.
func (lc *selfConn) waitEnd(id string, d time.Duration) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		select {
		case env, ok := <-lc.actions:
			if !ok {
				return
			}
			if done, _ := turnEnd(env.Action, id); done {
				return
			}
		case <-timeout.C:
			return
		}
	}
}

// close ends the connection; the session goes on.
func (lc *selfConn) close() {
	_ = lc.w.Close()
	_ = lc.r.Close()
	<-lc.c.done
	<-lc.done
}
