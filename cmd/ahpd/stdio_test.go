package main

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/ahpd/ahpd/protocol/protocoltest"
)

// rpcMessage is one JSON-RPC 2.0 message as ahpd writes it.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// stdioClient speaks to ahpd --stdio: one JSON-RPC message a line.
type stdioClient struct {
	t    *testing.T
	p    *proc
	next int // the next stdout line to read
}

func (c *stdioClient) write(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.p.stdin, line+"\n"); err != nil {
		c.t.Fatalf("writing to ahpd: %v", err)
	}
}

// response reads stdout up to the response whose id is id (as JSON),
// skipping notifications. Every line must be a JSON-RPC message. Answers
// may come in any order (JSON-RPC promises none): one read past while
// looking for another is found among the lines already read.
func (c *stdioClient) response(id string) rpcMessage {
	c.t.Helper()
	for i := 0; ; i++ {
		line, ok := c.p.line(i, exitTimeout)
		if !ok {
			c.t.Fatalf("no response %s from ahpd; stderr:\n%s", id, c.p.stderr.String())
		}
		c.next = max(c.next, i+1)
		m := parseRPC(c.t, line)
		if m.Method == "" && string(m.ID) == id {
			return m
		}
	}
}

func parseRPC(t *testing.T, line string) rpcMessage {
	t.Helper()
	var m rpcMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
		t.Fatalf("stdout carries a line that is not JSON-RPC 2.0: %q", line)
	}
	return m
}

func TestStdio(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := launch(t, e, withStdin, "--stdio", "--state-dir", e.state)
	c := &stdioClient{t: t, p: p}

	c.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":"x"}}`)
	m := c.response("1")
	if m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(m.Result, &init); err != nil || init.ProtocolVersion != "1.0.0" {
		t.Errorf("initialize result %s, want protocolVersion 1.0.0", m.Result)
	}
	schemas, err := protocoltest.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("InitializeResult", m.Result); err != nil {
		t.Errorf("initialize result: %v", err)
	}

	c.write(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"channel":"ahp-root://"}}`)
	if m := c.response("2"); m.Error != nil {
		t.Errorf("ping: %+v", m.Error)
	}

	// A line that is not JSON is answered, and the connection goes on.
	c.write(`{"jsonrpc":"2.0","id":3,"method":`)
	if m := c.response("null"); m.Error == nil || m.Error.Code != -32700 {
		t.Errorf("malformed JSON: got %+v, want a -32700 error", m)
	}
	c.write(`{"jsonrpc":"2.0","id":4,"method":"ping","params":{"channel":"ahp-root://"}}`)
	if m := c.response("4"); m.Error != nil {
		t.Errorf("ping after malformed JSON: %+v", m.Error)
	}

	// The end of stdin is the end of the connection and of ahpd.
	if err := p.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d after stdin closed, want 0", code)
	}
	for _, line := range p.stdoutLines() {
		parseRPC(t, line)
	}
}

// TestStdioSIGTERM stops a stdio daemon whose client keeps stdin open:
// the signal, not the end of stdin, ends it.
func TestStdioSIGTERM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := launch(t, e, withStdin, "--stdio", "--state-dir", e.state)
	c := &stdioClient{t: t, p: p}
	c.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":"x"}}`)
	if m := c.response("1"); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	p.terminate()
	for _, line := range p.stdoutLines() {
		parseRPC(t, line)
	}
}

// TestStdioInitializeThenListAtOnce sends initialize and listSessions
// back to back, as a script on stdio does: the listing is taken after the
// handshake.
func TestStdioInitializeThenListAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := launch(t, e, withStdin, "--stdio", "--state-dir", e.state)
	c := &stdioClient{t: t, p: p}
	c.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["0.9.0"],"clientId":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"listSessions","params":{"channel":"ahp-root://"}}`)
	if m := c.response("1"); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	if m := c.response("2"); m.Error != nil {
		t.Errorf("listSessions right after initialize: %+v", m.Error)
	}
	p.terminate()
}

// TestStdioAnswersBeforeExit sends requests and ends stdin at once, as
// `echo ... | ahpd --stdio` does: every one is answered before ahpd exits
// (it printed nothing, once).
func TestStdioAnswersBeforeExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := launch(t, e, withStdin, "--stdio", "--state-dir", e.state)
	c := &stdioClient{t: t, p: p}
	c.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"createSession","params":{"channel":"ahp-session:/s1","provider":"script"}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"listSessions","params":{"channel":"ahp-root://"}}`)
	if err := p.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2", "3"} {
		if m := c.response(id); m.Error != nil {
			t.Errorf("request %s: %+v", id, m.Error)
		}
	}
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d; stderr:\n%s", code, p.stderr.String())
	}
}

// TestStdioReaderGone closes ahpd's stdout before it answers: the write
// fails with EPIPE, which is the peer closing; ahpd ends as at the end of
// stdin, where SIGPIPE once killed it.
func TestStdioReaderGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := launch(t, e, withStdin, "--stdio", "--state-dir", e.state)
	if err := p.stdout.Close(); err != nil {
		t.Fatal(err)
	}
	c := &stdioClient{t: t, p: p}
	c.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":"x"}}`)
	if code := p.wait(exitTimeout); code != 0 {
		t.Errorf("exit status %d (%v); stderr:\n%s", code, p.cmd.ProcessState, p.stderr.String())
	}
}
