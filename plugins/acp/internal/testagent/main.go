// Command testagent is a scripted ACP agent for the acp backend's tests,
// built on the agent side of the ACP Go SDK. Each line of a prompt is a
// step ("say hi", "tool t1 Read a file", "permit t2 Edit", "wait",
// "crash", "exit 1", "pid", "bigline 12000000", "hang", "run echo hi",
// "spawn sleep 9", ...), so a test chooses what the agent does by what it
// asks.
//
// The environment sets what the agent is:
//
//	TESTAGENT_STATE    directory its sessions are kept in, so that a new
//	                   process can load them; in memory only if unset
//	TESTAGENT_CAPS     "load" (the default), "resume" or "none": how it
//	                   can bring a session back; "fork": it loads them
//	                   and offers session/fork
//	TESTAGENT_GARBAGE  "lines": write non-ACP lines to stdout first, then
//	                   work; "exit": write them, then exit 3; "hang":
//	                   write them, then never answer
//	TESTAGENT_OPTIONS  "1": sessions have config options (style, a
//	                   select; verbose, a boolean) and two models
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

func main() {
	out := &lockedWriter{w: os.Stdout}
	switch os.Getenv("TESTAGENT_GARBAGE") {
	case "lines":
		writeGarbage(out)
	case "exit":
		writeGarbage(out)
		fmt.Fprintln(os.Stderr, "testagent: garbage written, giving up")
		os.Exit(3)
	case "hang":
		writeGarbage(out)
		io.Copy(io.Discard, os.Stdin)
		return
	}

	a := &agent{
		out:      out,
		stateDir: os.Getenv("TESTAGENT_STATE"),
		caps:     os.Getenv("TESTAGENT_CAPS"),
		options:  os.Getenv("TESTAGENT_OPTIONS") == "1",
		sessions: map[string]*session{},
	}
	conn := acp.NewAgentSideConnection(a, out, os.Stdin)
	conn.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	a.conn = conn
	fmt.Fprintf(os.Stderr, "testagent: pid %d ready\n", os.Getpid())
	<-conn.Done()
	if hung.Load() {
		// A hung agent does not exit when its stdin ends either.
		for {
			time.Sleep(time.Hour)
		}
	}
}

// hung is set by the "hang" step: the agent then answers nothing and
// exits only when killed.
var hung atomic.Bool

// lockedWriter lets raw lines and the SDK's messages share stdout
// without interleaving.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// writeGarbage writes lines a client must survive: not JSON, JSON that
// is no JSON-RPC message, a response to no request.
func writeGarbage(w io.Writer) {
	fmt.Fprintln(w, "this is not JSON")
	fmt.Fprintln(w, `{"hello": "world"}`)
	fmt.Fprintln(w, `{"jsonrpc":"2.0","id":987654,"result":{}}`)
	fmt.Fprintln(w, `[1, 2, 3`)
}

// session is one conversation and everything sent in it, for replay.
type session struct {
	mu      sync.Mutex
	Cwd     string              `json:"cwd"`
	Prompts int                 `json:"prompts"`
	History []acp.SessionUpdate `json:"history"`
	Style   string              `json:"style"`
	Verbose bool                `json:"verbose"`
	Model   string              `json:"model"`
}

type agent struct {
	conn     *acp.AgentSideConnection
	out      io.Writer
	stateDir string
	caps     string
	options  bool

	mu       sync.Mutex
	sessions map[string]*session
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func (a *agent) Initialize(ctx context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	caps := acp.AgentCapabilities{}
	switch a.caps {
	case "", "load":
		caps.LoadSession = true
	case "fork":
		caps.LoadSession = true
		caps.SessionCapabilities.Fork = &acp.SessionForkCapabilities{}
	case "resume":
		caps.SessionCapabilities.Resume = &acp.SessionResumeCapabilities{}
	}
	if !req.ClientCapabilities.Fs.ReadTextFile || !req.ClientCapabilities.Fs.WriteTextFile || !req.ClientCapabilities.Terminal {
		fmt.Fprintf(os.Stderr, "testagent: client capabilities missing: %+v\n", req.ClientCapabilities)
	}
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: caps,
		AgentInfo:         &acp.Implementation{Name: "testagent", Version: "1"},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var b [8]byte
	rand.Read(b[:])
	id := "sess-" + hex.EncodeToString(b[:])
	s := &session{Cwd: req.Cwd, Style: "plain", Model: "m1"}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	resp := acp.NewSessionResponse{SessionId: acp.SessionId(id)}
	if a.options {
		resp.ConfigOptions, resp.Models = s.configOptions(), s.models()
	}
	return resp, nil
}

// configOptions are the session's config options with their values.
func (s *session) configOptions() []acp.SessionConfigOption {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []acp.SessionConfigOption{
		{Select: &acp.SessionConfigOptionSelect{
			Id: "style", Name: "Style", Type: "select", CurrentValue: acp.SessionConfigValueId(s.Style),
			Options: acp.SessionConfigSelectOptions{Ungrouped: &acp.SessionConfigSelectOptionsUngrouped{
				{Value: "plain", Name: "Plain"},
				{Value: "fancy", Name: "Fancy", Description: acp.Ptr("With flourishes")},
			}},
		}},
		{Boolean: &acp.SessionConfigOptionBoolean{Id: "verbose", Name: "Verbose", Type: "boolean", CurrentValue: s.Verbose}},
	}
}

// models are the models the session offers and the one it uses.
func (s *session) models() *acp.SessionModelState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &acp.SessionModelState{
		AvailableModels: []acp.ModelInfo{{ModelId: "m1", Name: "Model One"}, {ModelId: "m2", Name: "Model Two"}},
		CurrentModelId:  acp.ModelId(s.Model),
	}
}

func (a *agent) LoadSession(ctx context.Context, req acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if a.caps != "" && a.caps != "load" && a.caps != "fork" {
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	s, err := a.find(string(req.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s.mu.Lock()
	history := append([]acp.SessionUpdate(nil), s.History...)
	s.mu.Unlock()
	for _, u := range history {
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: req.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) ResumeSession(ctx context.Context, req acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	if a.caps != "resume" {
		return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
	}
	if _, err := a.find(string(req.SessionId)); err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	return acp.ResumeSessionResponse{}, nil
}

// UnstableForkSession copies a whole session under a new id, as ACP's
// session/fork does.
func (a *agent) UnstableForkSession(ctx context.Context, req acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	if a.caps != "fork" {
		return acp.UnstableForkSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionFork)
	}
	src, err := a.find(string(req.SessionId))
	if err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	var b [8]byte
	rand.Read(b[:])
	id := "sess-" + hex.EncodeToString(b[:])
	src.mu.Lock()
	s := &session{Cwd: req.Cwd, Prompts: src.Prompts, History: append([]acp.SessionUpdate(nil), src.History...),
		Style: src.Style, Verbose: src.Verbose, Model: src.Model}
	src.mu.Unlock()
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	if err := a.save(id, s); err != nil {
		return acp.UnstableForkSessionResponse{}, err
	}
	return acp.UnstableForkSessionResponse{SessionId: acp.SessionId(id)}, nil
}

// find returns a session of this process or, failing that, of the state
// directory.
func (a *agent) find(id string) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.sessions[id]; ok {
		return s, nil
	}
	notFound := &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"sessionId": id}}
	if a.stateDir == "" || strings.ContainsAny(id, `/\`) {
		return nil, notFound
	}
	b, err := os.ReadFile(filepath.Join(a.stateDir, id+".json"))
	if err != nil {
		return nil, notFound
	}
	s := &session{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	a.sessions[id] = s
	return s, nil
}

// save writes a session to the state directory.
func (a *agent) save(id string, s *session) error {
	if a.stateDir == "" {
		return nil
	}
	s.mu.Lock()
	b, err := json.Marshal(s)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(a.stateDir, id+".json"), b, 0o644)
}

func (a *agent) Cancel(context.Context, acp.CancelNotification) error {
	// The SDK cancels the prompt's context itself.
	fmt.Fprintln(os.Stderr, "testagent: cancel received")
	return nil
}

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, req acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if !a.options {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	var sid acp.SessionId
	switch {
	case req.ValueId != nil:
		sid = req.ValueId.SessionId
	case req.Boolean != nil:
		sid = req.Boolean.SessionId
	}
	s, err := a.find(string(sid))
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	s.mu.Lock()
	var set string
	switch {
	case req.ValueId != nil && req.ValueId.ConfigId == "style" && (req.ValueId.Value == "plain" || req.ValueId.Value == "fancy"):
		s.Style, set = string(req.ValueId.Value), "style="+string(req.ValueId.Value)
	case req.Boolean != nil && req.Boolean.ConfigId == "verbose":
		s.Verbose, set = req.Boolean.Value, fmt.Sprint("verbose=", req.Boolean.Value)
	default:
		s.mu.Unlock()
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such option or value"})
	}
	s.mu.Unlock()
	// Told once it holds, for tests to wait on.
	fmt.Fprintf(os.Stderr, "testagent: config %s\n", set)
	return acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
}

// UnstableSetSessionModel serves session/set_model, which the SDK finds
// by this method.
func (a *agent) UnstableSetSessionModel(ctx context.Context, req acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	s, err := a.find(string(req.SessionId))
	if err != nil || !a.options {
		return acp.UnstableSetSessionModelResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetModel)
	}
	if req.ModelId != "m1" && req.ModelId != "m2" {
		return acp.UnstableSetSessionModelResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such model"})
	}
	s.mu.Lock()
	s.Model = string(req.ModelId)
	s.mu.Unlock()
	return acp.UnstableSetSessionModelResponse{}, nil
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// Prompt runs the prompt's lines as steps and records the turn for
// replay, however it ends.
func (a *agent) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
	id := string(req.SessionId)
	s, err := a.find(id)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	var text strings.Builder
	for _, b := range req.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	t := &turn{agent: a, sess: s, id: req.SessionId, resp: acp.PromptResponse{StopReason: acp.StopReasonEndTurn}}
	user := acp.UpdateUserMessageText(text.String())
	user.UserMessageChunk.MessageId = req.MessageId
	t.record(user)

	err = t.run(ctx, text.String())
	s.mu.Lock()
	s.Prompts++
	s.mu.Unlock()
	if serr := a.save(id, s); serr != nil {
		fmt.Fprintln(os.Stderr, "testagent: save:", serr)
	}
	switch {
	case ctx.Err() != nil:
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case err != nil:
		return acp.PromptResponse{}, err
	}
	return t.resp, nil
}

// turn is one prompt being run.
type turn struct {
	agent *agent
	sess  *session
	id    acp.SessionId
	resp  acp.PromptResponse
}

// record keeps an update for replay without sending it.
func (t *turn) record(u acp.SessionUpdate) {
	t.sess.mu.Lock()
	defer t.sess.mu.Unlock()
	t.sess.History = append(t.sess.History, u)
}

// send sends an update and records it.
func (t *turn) send(ctx context.Context, u acp.SessionUpdate) error {
	t.record(u)
	return t.agent.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: t.id, Update: u})
}

func (t *turn) say(ctx context.Context, format string, args ...any) error {
	return t.send(ctx, acp.UpdateAgentMessageText(fmt.Sprintf(format, args...)))
}

func (t *turn) run(ctx context.Context, script string) error {
	if strings.HasPrefix(script, "Your previous reply was cut short") {
		// ahpd asks a new process to go on with a turn the last one died
		// in; this agent says so, with what it remembers.
		t.sess.mu.Lock()
		n := t.sess.Prompts
		t.sess.mu.Unlock()
		return t.say(ctx, "continuing after %d prompts", n)
	}
	for line := range strings.Lines(script) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(line, " ")
		if err := t.step(ctx, cmd, rest); err != nil {
			return err
		}
	}
	return nil
}

func (t *turn) step(ctx context.Context, cmd, rest string) error {
	conn := t.agent.conn
	switch cmd {
	case "say":
		return t.say(ctx, "%s", rest)
	case "think":
		return t.send(ctx, acp.UpdateAgentThoughtText(rest))
	case "flood":
		// flood N RATE TEXT: N chunks of TEXT, RATE a second, as a fast
		// model streams; a # in TEXT is the chunk's number, so a client
		// can tell a chunk lost or out of place.
		var count, rate int
		var text string
		if _, err := fmt.Sscanf(rest, "%d %d %s", &count, &rate, &text); err != nil || rate <= 0 {
			return fmt.Errorf("flood N RATE TEXT: %q", rest)
		}
		numbered := strings.Contains(text, "#")
		start := time.Now()
		for i := range count {
			chunk := text
			if numbered {
				chunk = strings.ReplaceAll(text, "#", strconv.Itoa(i))
			}
			if err := t.say(ctx, "%s", chunk); err != nil {
				return err
			}
			// Ahead of the rate, wait for it.
			if ahead := time.Duration(i+1)*time.Second/time.Duration(rate) - time.Since(start); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
		}
		return nil
	case "title":
		return t.send(ctx, acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{SessionUpdate: "session_info_update", Title: &rest}})
	case "tool", "fail":
		id, title, _ := strings.Cut(rest, " ")
		if err := t.send(ctx, acp.StartToolCall(acp.ToolCallId(id), title,
			acp.WithStartKind(acp.ToolKindRead),
			acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartRawInput(map[string]any{"id": id}))); err != nil {
			return err
		}
		if err := t.send(ctx, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusInProgress))); err != nil {
			return err
		}
		status, output := acp.ToolCallStatusCompleted, "output of "+id
		if cmd == "fail" {
			status, output = acp.ToolCallStatusFailed, "it broke"
		}
		return t.send(ctx, acp.UpdateToolCall(acp.ToolCallId(id),
			acp.WithUpdateStatus(status),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(output))})))
	case "permit", "permit-unknown":
		id, title, _ := strings.Cut(rest, " ")
		if cmd == "permit" {
			if err := t.send(ctx, acp.StartToolCall(acp.ToolCallId(id), title,
				acp.WithStartKind(acp.ToolKindEdit),
				acp.WithStartStatus(acp.ToolCallStatusPending),
				acp.WithStartRawInput(map[string]any{"path": "x.txt"}))); err != nil {
				return err
			}
		}
		resp, err := conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: t.id,
			ToolCall:  acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(id), Title: &title, Kind: acp.Ptr(acp.ToolKindEdit)},
			Options: []acp.PermissionOption{
				{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always", OptionId: "always"},
				{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
				{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
			},
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return err
		case resp.Outcome.Cancelled != nil:
			return t.say(ctx, "cancelled %s", id)
		case resp.Outcome.Selected.OptionId == "allow":
			if err := t.send(ctx, acp.UpdateToolCall(acp.ToolCallId(id),
				acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
				acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("edited"))}))); err != nil {
				return err
			}
			return t.say(ctx, "allowed %s", id)
		default:
			// A denied call gets a failed update, which the client must
			// not report over the user's denial.
			if err := t.send(ctx, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusFailed))); err != nil {
				return err
			}
			return t.say(ctx, "%s %s", resp.Outcome.Selected.OptionId, id)
		}
	case "request", "request-lasting":
		// request KIND ID [PATH...]: a tool call of that kind touching
		// the paths, and a permission request for it; request-lasting
		// offers only "always" to allow it.
		f := strings.Fields(rest)
		if len(f) < 2 {
			return fmt.Errorf("%s KIND ID [PATH...]: %q", cmd, rest)
		}
		kind, id := acp.ToolKind(f[0]), acp.ToolCallId(f[1])
		var locs []acp.ToolCallLocation
		for _, p := range f[2:] {
			locs = append(locs, acp.ToolCallLocation{Path: t.abs(p)})
		}
		if err := t.send(ctx, acp.StartToolCall(id, string(kind)+" "+f[1],
			acp.WithStartKind(kind),
			acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartLocations(locs))); err != nil {
			return err
		}
		allow := acp.PermissionOption{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"}
		if cmd == "request-lasting" {
			allow = acp.PermissionOption{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always", OptionId: "always"}
		}
		resp, err := conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: t.id,
			ToolCall:  acp.ToolCallUpdate{ToolCallId: id},
			Options:   []acp.PermissionOption{allow, {Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"}},
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return err
		case resp.Outcome.Cancelled != nil:
			return t.say(ctx, "cancelled %s. ", id)
		case resp.Outcome.Selected.OptionId == "reject":
			if err := t.send(ctx, acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusFailed))); err != nil {
				return err
			}
			return t.say(ctx, "rejected %s. ", id)
		}
		if err := t.send(ctx, acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("done"))}))); err != nil {
			return err
		}
		return t.say(ctx, "%s %s. ", resp.Outcome.Selected.OptionId, id)
	case "wait":
		if err := t.say(ctx, "waiting"); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	case "wait-stubborn":
		// Ignores session/cancel: the client must kill it.
		if err := t.say(ctx, "waiting"); err != nil {
			return err
		}
		time.Sleep(time.Minute)
		return nil
	case "hang":
		// Ignores session/cancel and the end of its stdin: only a kill
		// ends it.
		hung.Store(true)
		if err := t.say(ctx, "hanging"); err != nil {
			return err
		}
		for {
			time.Sleep(time.Hour)
		}
	case "crash":
		fmt.Fprintln(os.Stderr, "testagent: fatal: boom")
		os.Exit(2)
	case "exit":
		// exit N: ends the process with status N, saying nothing.
		code, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("exit N: %q", rest)
		}
		os.Exit(code)
	case "pid":
		return t.say(ctx, "pid %d", os.Getpid())
	case "bigline":
		// bigline N: a session update of N bytes on one line, more than
		// a client may read; the agent dies of SIGPIPE when the client
		// stops reading it.
		n, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("bigline N: %q", rest)
		}
		head := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, t.id)
		line := head + strings.Repeat("x", max(0, n-len(head)-6)) + `"}}}}` + "\n"
		_, err = io.WriteString(t.agent.out, line)
		return err
	case "garbage":
		writeGarbage(t.agent.out)
		return nil
	case "unknown-update":
		// A kind newer than the SDK, with the members of a message chunk:
		// the SDK decodes it as one.
		line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"mystery_kind","content":{"type":"text","text":"MYSTERY"}}}}`, t.id)
		_, err := fmt.Fprintln(t.agent.out, line)
		return err
	case "refuse":
		t.resp.StopReason = acp.StopReasonRefusal
		return nil
	case "usage":
		t.resp.Usage = &acp.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30}
		return nil
	case "config":
		t.sess.mu.Lock()
		style, verbose, model := t.sess.Style, t.sess.Verbose, t.sess.Model
		t.sess.mu.Unlock()
		return t.say(ctx, "style=%s verbose=%v model=%s", style, verbose, model)
	case "history":
		t.sess.mu.Lock()
		n := t.sess.Prompts
		t.sess.mu.Unlock()
		return t.say(ctx, "history: %d", n)
	case "write":
		path, content, _ := strings.Cut(rest, " ")
		_, err := conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: t.id, Path: t.abs(path), Content: content})
		if err != nil {
			return t.say(ctx, "write failed: %v", err)
		}
		return t.say(ctx, "wrote %s", path)
	case "read":
		f := strings.Fields(rest)
		req := acp.ReadTextFileRequest{SessionId: t.id, Path: t.abs(f[0])}
		if len(f) == 3 {
			line, _ := strconv.Atoi(f[1])
			limit, _ := strconv.Atoi(f[2])
			req.Line, req.Limit = &line, &limit
		}
		resp, err := conn.ReadTextFile(ctx, req)
		if err != nil {
			return t.say(ctx, "read failed: %v", err)
		}
		return t.say(ctx, "read: %s", resp.Content)
	case "run", "run-leave", "run-kill":
		return t.runCommand(ctx, cmd, splitArgs(rest))
	case "spawn":
		return t.spawn(ctx, splitArgs(rest))
	}
	return fmt.Errorf("unknown step %q", cmd)
}

// abs makes a relative path absolute in the session's directory, as ACP
// paths are.
func (t *turn) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(t.sess.Cwd, p)
}

// runCommand runs argv in a terminal. "run" waits for it and reports its
// output; "run-leave" leaves it running, unreleased; "run-kill" kills it
// and reports how it ended.
func (t *turn) runCommand(ctx context.Context, mode string, argv []string) error {
	conn := t.agent.conn
	if len(argv) == 0 {
		return errors.New("run: no command")
	}
	created, err := conn.CreateTerminal(ctx, acp.CreateTerminalRequest{
		SessionId:       t.id,
		Command:         argv[0],
		Args:            argv[1:],
		Env:             []acp.EnvVariable{{Name: "TESTAGENT_VAR", Value: "from-env"}},
		OutputByteLimit: acp.Ptr(1024),
	})
	if err != nil {
		return t.say(ctx, "terminal failed: %v", err)
	}
	term := created.TerminalId
	switch mode {
	case "run-leave":
		return t.say(ctx, "left %s", term)
	case "run-kill":
		time.Sleep(100 * time.Millisecond)
		if _, err := conn.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: t.id, TerminalId: term}); err != nil {
			return err
		}
	}
	exit, err := conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: t.id, TerminalId: term})
	if err != nil {
		return err
	}
	out, err := conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: t.id, TerminalId: term})
	if err != nil {
		return err
	}
	if _, err := conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: t.id, TerminalId: term}); err != nil {
		return err
	}
	status := "signal ?"
	switch {
	case exit.ExitCode != nil:
		status = fmt.Sprintf("exit %d", *exit.ExitCode)
	case exit.Signal != nil:
		status = "signal " + *exit.Signal
	}
	return t.say(ctx, "%s truncated=%v: %s", status, out.Truncated, out.Output)
}

// spawn starts argv as the agent's own child, in the session's
// directory, and leaves it running, as an agent's tool or helper may.
func (t *turn) spawn(ctx context.Context, argv []string) error {
	if len(argv) == 0 {
		return errors.New("spawn: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = t.sess.Cwd
	if err := cmd.Start(); err != nil {
		return t.say(ctx, "spawn failed: %v", err)
	}
	go cmd.Wait() // reaps it, should it end while the agent runs
	return t.say(ctx, "spawned %d", cmd.Process.Pid)
}

// splitArgs splits s at spaces, keeping what single quotes enclose
// together.
func splitArgs(s string) []string {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			inQuote = !inQuote
			have = true
		case r == ' ' && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}
