// Package claudetest is a stand-in for the Anthropic Messages API that the
// Claude Code CLI can be pointed at (ANTHROPIC_BASE_URL), so that tests run
// the real CLI without a network or a model. A test queues the responses
// the "model" gives, one per model call, and reads back the requests the
// CLI made.
//
// The server listens on 127.0.0.1 only. It answers POST /v1/messages (with
// or without the ?beta=true the CLI adds) as a stream of server-sent
// events, or as one JSON message when a request asks for no stream; HEAD
// and GET / (the CLI's reachability probe) get 200; anything else 404.
package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// Server is a scripted Messages API. Its methods are safe for concurrent
// use.
type Server struct {
	// URL is the base URL to give the CLI as ANTHROPIC_BASE_URL.
	URL string

	srv *httptest.Server

	mu       sync.Mutex
	queue    []Response
	requests []*Request
	received chan *Request
	nextID   int
}

// NewServer starts a server; Close stops it.
func NewServer() *Server {
	s := &Server{received: make(chan *Request, 64)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server. Streams still running are cut off, as a
// network failure would cut them.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Env returns the environment for a CLI run against s, in the form
// claude.Options.Env takes: it sets HOME to home (where the CLI keeps its
// settings and transcripts), points the CLI at s with a dummy key, turns
// off the CLI's other traffic, and removes every other variable of the
// test process but PATH (an entry without "="), so that neither the
// user's configuration nor credentials reach the CLI.
func (s *Server) Env(home string) []string {
	env := []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
	}
	keep := map[string]bool{"PATH": true}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep[k] = true
	}
	var unset []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "" && !keep[k] {
			unset = append(unset, k)
		}
	}
	return append(unset, env...)
}

// Enqueue adds responses, given in order to the model calls to come.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Pending returns how many queued responses no request has taken yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns the model calls received so far, oldest first.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Received delivers each model call as it arrives, before it is answered.
// Calls arriving while the channel is full are not delivered there, only
// recorded.
func (s *Server) Received() <-chan *Request { return s.received }

// Fallback is the reply to a model call when no response is queued.
const Fallback = "(claudetest: no response queued)"

// Response is one scripted model reply.
type Response struct {
	Blocks []Block
	// StopReason defaults to "tool_use" when a block is a tool use, and
	// "end_turn" otherwise.
	StopReason string
	// ChunkDelay is waited before each delta event: a slow model.
	ChunkDelay time.Duration
	// ChunkSize splits text into deltas of this many bytes (0: one
	// delta per block).
	ChunkSize int
	// InputTokens and OutputTokens are the usage reported; zero means a
	// small made-up figure.
	InputTokens, OutputTokens int64
	// OnRequest, when set, is called with the request before the reply
	// starts.
	OnRequest func(*Request)
	// Status, when set, makes the reply an API error of that HTTP status
	// carrying ErrorMessage instead of a message. The CLI retries some
	// statuses (429, 5xx) with backoff; 400 it does not.
	Status       int
	ErrorMessage string
}

// Error returns a reply that fails the model call with an
// invalid_request_error (HTTP 400) saying message.
func Error(message string) Response {
	return Response{Status: http.StatusBadRequest, ErrorMessage: message}
}

// Block is one content block of a reply.
type Block struct {
	// Type is "text", "thinking" or "tool_use".
	Type string
	// Text is the text of a text block or the thought of a thinking
	// block.
	Text string
	// ID and Name name a tool use; Input is its input, encoded as JSON.
	ID    string
	Name  string
	Input any
}

// Text returns a reply of one text block.
func Text(s string) Response { return Response{Blocks: []Block{{Type: "text", Text: s}}} }

// Thinking returns a reply that thinks thought and then says text.
func Thinking(thought, text string) Response {
	return Response{Blocks: []Block{{Type: "thinking", Text: thought}, {Type: "text", Text: text}}}
}

// ToolUse returns a reply that calls the tool name with input, with a
// text block first when text is not empty.
func ToolUse(text, id, name string, input any) Response {
	var r Response
	if text != "" {
		r.Blocks = append(r.Blocks, Block{Type: "text", Text: text})
	}
	r.Blocks = append(r.Blocks, Block{Type: "tool_use", ID: id, Name: name, Input: input})
	return r
}

// Write returns a reply that calls the CLI's Write tool to write content
// to path.
func Write(id, path, content string) Response {
	return ToolUse("", id, "Write", map[string]string{"file_path": path, "content": content})
}

// Request is a model call the server received.
type Request struct {
	Received  time.Time
	Path      string // with its query
	Model     string
	Stream    bool
	MaxTokens int64
	// Messages is the conversation sent, oldest first.
	Messages []Message
	// Tools lists the names of the tools offered.
	Tools []string
	// Body is the request as it came.
	Body []byte

	mu        sync.Mutex
	firstByte time.Time
}

// FirstByte returns when the first delta of the reply was written, or
// zero if none was.
func (r *Request) FirstByte() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstByte
}

// Message is one message of a request's conversation.
type Message struct {
	Role   string
	Blocks []ContentBlock
}

// ContentBlock is a content block of a request message, the parts tests
// look at.
type ContentBlock struct {
	Type string
	// Text is a text block's text, or a tool result's text.
	Text string
	// ToolUseID names the tool use of a tool_result; ID that of a
	// tool_use.
	ToolUseID string
	ID        string
	Name      string
	IsError   bool
}

// UserText returns what the user said last: the last text block of the
// last user message that is not a system reminder the CLI adds.
func (r *Request) UserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		for j := len(m.Blocks) - 1; j >= 0; j-- {
			b := m.Blocks[j]
			if b.Type == "text" && !isReminder(b.Text) {
				return b.Text
			}
		}
		return ""
	}
	return ""
}

// ToolResults returns the tool results of the last user message.
func (r *Request) ToolResults() []ContentBlock {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		var out []ContentBlock
		for _, b := range r.Messages[i].Blocks {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
		return out
	}
	return nil
}

// Texts returns the text of every text block of the conversation's user
// and assistant messages that is not a system reminder, oldest first,
// prefixed with its role ("user: hi", "assistant: hello").
func (r *Request) Texts() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			// The CLI also sends messages of its own (a "system" one
			// listing its agents and skills).
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "text" && !isReminder(b.Text) {
				out = append(out, m.Role+": "+b.Text)
			}
		}
	}
	return out
}

func isReminder(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "<system-reminder>")
}

// wireRequest is the part of a Messages API request the server reads.
type wireRequest struct {
	Model     string `json:"model"`
	Stream    bool   `json:"stream"`
	MaxTokens int64  `json:"max_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

func parseRequest(path string, body []byte) (*Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	r := &Request{Received: time.Now(), Path: path, Model: w.Model, Stream: w.Stream, MaxTokens: w.MaxTokens, Body: body}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	for _, m := range w.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Blocks: parseContent(m.Content)})
	}
	return r, nil
}

// parseContent reads message content, a string or a list of blocks.
func parseContent(raw json.RawMessage) []ContentBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var blocks []wireBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	out := make([]ContentBlock, 0, len(blocks))
	for _, b := range blocks {
		cb := ContentBlock{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, ToolUseID: b.ToolUseID, IsError: b.IsError}
		if b.Type == "tool_result" {
			var texts []string
			for _, c := range parseContent(b.Content) {
				if c.Type == "text" {
					texts = append(texts, c.Text)
				}
			}
			cb.Text = strings.Join(texts, "\n")
		}
		out = append(out, cb)
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.URL.Path == "/" && (req.Method == http.MethodHead || req.Method == http.MethodGet):
		w.WriteHeader(http.StatusOK)
	case req.URL.Path == "/v1/messages/count_tokens" && req.Method == http.MethodPost:
		writeJSON(w, map[string]int{"input_tokens": 10})
	case req.URL.Path == "/v1/messages" && req.Method == http.MethodPost:
		s.messages(w, req)
	default:
		http.NotFound(w, req)
	}
}

func (s *Server) messages(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	r, err := parseRequest(req.URL.RequestURI(), body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, r)
	resp := Text(Fallback)
	if len(s.queue) > 0 {
		resp = s.queue[0]
		s.queue = s.queue[1:]
	}
	s.nextID++
	msgID := fmt.Sprintf("msg_claudetest_%d", s.nextID)
	s.mu.Unlock()
	select {
	case s.received <- r:
	default:
	}
	if resp.OnRequest != nil {
		resp.OnRequest(r)
	}
	if resp.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.Status)
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": errorType(resp.Status), "message": resp.ErrorMessage}})
		w.Write(b)
		return
	}
	resp.fill()
	if !r.Stream {
		writeJSON(w, resp.message(msgID, r.Model, true))
		return
	}
	resp.stream(req, w, r, msgID)
}

// fill sets the defaults of r.
func (r *Response) fill() {
	if r.StopReason == "" {
		r.StopReason = "end_turn"
		for _, b := range r.Blocks {
			if b.Type == "tool_use" {
				r.StopReason = "tool_use"
			}
		}
	}
	if r.InputTokens == 0 {
		r.InputTokens = 100
	}
	if r.OutputTokens == 0 {
		r.OutputTokens = 10 + int64(len(r.Blocks))
	}
	for i := range r.Blocks {
		if b := &r.Blocks[i]; b.Type == "tool_use" && b.ID == "" {
			b.ID = fmt.Sprintf("toolu_claudetest_%d", i)
		}
	}
}

// message returns the reply as a Messages API message, whole when done,
// or as message_start carries it.
func (r *Response) message(id, model string, done bool) map[string]any {
	content := []any{}
	stop := any(nil)
	output := int64(1)
	if done {
		for _, b := range r.Blocks {
			content = append(content, b.start(true))
		}
		stop, output = r.StopReason, r.OutputTokens
	}
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": r.InputTokens, "output_tokens": output,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		},
	}
}

// start returns the block as content_block_start carries it, or whole.
func (b Block) start(whole bool) map[string]any {
	switch b.Type {
	case "thinking":
		if whole {
			return map[string]any{"type": "thinking", "thinking": b.Text, "signature": "claudetest"}
		}
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "tool_use":
		input := any(map[string]any{})
		if whole {
			input = b.Input
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": input}
	default:
		if whole {
			return map[string]any{"type": "text", "text": b.Text}
		}
		return map[string]any{"type": "text", "text": ""}
	}
}

// deltas returns the delta events that build the block.
func (b Block) deltas(size int) []map[string]any {
	var kind, key, body string
	switch b.Type {
	case "thinking":
		kind, key, body = "thinking_delta", "thinking", b.Text
	case "tool_use":
		input, _ := json.Marshal(b.Input)
		kind, key, body = "input_json_delta", "partial_json", string(input)
	default:
		kind, key, body = "text_delta", "text", b.Text
	}
	var out []map[string]any
	for _, chunk := range chunks(body, size) {
		out = append(out, map[string]any{"type": kind, key: chunk})
	}
	if b.Type == "thinking" {
		out = append(out, map[string]any{"type": "signature_delta", "signature": "claudetest"})
	}
	return out
}

// chunks splits s into pieces of at most size bytes, not splitting a
// UTF-8 sequence; size 0 keeps s whole.
func chunks(s string, size int) []string {
	if size <= 0 || len(s) <= size {
		return []string{s}
	}
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		if n == 0 {
			n = min(size, len(s))
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// stream writes the reply as server-sent events. It stops early when the
// client goes away, as an interrupted CLI does.
func (r *Response) stream(req *http.Request, w http.ResponseWriter, rec *Request, msgID string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_"+msgID)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) bool {
		b, _ := json.Marshal(data)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return req.Context().Err() == nil
	}
	wait := func() bool {
		if r.ChunkDelay <= 0 {
			return true
		}
		t := time.NewTimer(r.ChunkDelay)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-req.Context().Done():
			return false
		}
	}

	if !send("message_start", map[string]any{"type": "message_start", "message": r.message(msgID, rec.Model, false)}) {
		return
	}
	for i, b := range r.Blocks {
		if !send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start(false)}) {
			return
		}
		for _, d := range b.deltas(r.ChunkSize) {
			if !wait() {
				return
			}
			rec.mu.Lock()
			if rec.firstByte.IsZero() {
				rec.firstByte = time.Now()
			}
			rec.mu.Unlock()
			if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	if !send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": r.StopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": r.OutputTokens},
	}) {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// errorType names the API error of an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	w.Write(b)
}
