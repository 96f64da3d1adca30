package acp

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

func TestLineRange(t *testing.T) {
	const content = "a\nb\nc\n"
	for _, tt := range []struct {
		line, limit *int
		want        string
	}{
		{nil, nil, content},
		{new(2), nil, "b\nc\n"},
		{new(2), new(1), "b\n"},
		{nil, new(2), "a\nb\n"},
		{new(4), nil, ""},
		{new(1), new(0), ""},
	} {
		got, err := lineRange(content, tt.line, tt.limit)
		if err != nil || got != tt.want {
			t.Errorf("lineRange(%v, %v) = %q, %v; want %q", tt.line, tt.limit, got, err, tt.want)
		}
	}
	if _, err := lineRange(content, new(0), nil); err == nil {
		t.Error("line 0 was accepted")
	}
	if got, _ := lineRange("no newline", new(1), new(1)); got != "no newline" {
		t.Errorf("last line without newline: %q", got)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "in"))
	c, err := newClient(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.root.Close()
	for path, want := range map[string]string{
		filepath.Join(dir, "a.txt"):           "a.txt",
		"rel/b.txt":                           filepath.Join("rel", "b.txt"),
		filepath.Join(dir, "in", "c.txt"):     filepath.Join("sub", "c.txt"),
		filepath.Join(dir, "new", "dir", "d"): filepath.Join("new", "dir", "d"),
		dir:                                   ".",
	} {
		if got, err := c.resolve(path); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{
		filepath.Join(dir, "..", "x"),
		"../x",
		filepath.Join(outside, "x"),
		filepath.Join(dir, "out", "x"),
		"/",
		"",
	} {
		if got, err := c.resolve(path); err == nil {
			t.Errorf("resolve(%q) = %q, want it refused", path, got)
		} else if re, ok := err.(*sdk.RequestError); !ok || re.Code != -32602 {
			t.Errorf("resolve(%q): %v, want an invalid params error", path, err)
		}
	}
}

func TestUpdateKindOfUnknownKind(t *testing.T) {
	var u sdk.SessionUpdate
	raw := `{"sessionUpdate":"mystery_kind","content":{"type":"text","text":"x"}}`
	if err := json.Unmarshal([]byte(raw), &u); err != nil {
		t.Fatal(err)
	}
	if got := updateKind(u); got != "mystery_kind" {
		t.Errorf("updateKind = %q", got)
	}
}

func TestPickOption(t *testing.T) {
	opts := []sdk.PermissionOption{
		{Kind: sdk.PermissionOptionKindRejectAlways, OptionId: "never"},
		{Kind: sdk.PermissionOptionKindAllowAlways, OptionId: "always"},
	}
	if id, ok := pickOption(opts, true); !ok || id != "always" {
		t.Errorf("allow: %q, %v", id, ok)
	}
	if id, ok := pickOption(opts, false); !ok || id != "never" {
		t.Errorf("reject: %q, %v", id, ok)
	}
	if _, ok := pickOption(opts[:1], true); ok {
		t.Error("an allow option was found among rejections")
	}
}

// TestDecodeUpdateAsTheSDK checks the text chunk decoder gives what the
// SDK's decoding gives, and leaves what it does not know to the SDK.
func TestDecodeUpdateAsTheSDK(t *testing.T) {
	for _, tt := range []struct {
		name, params string
		fast         bool
	}{
		{"message", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, true},
		{"thought with meta", `{"sessionId":"s","_meta":{"a":1},"update":{"sessionUpdate":"agent_thought_chunk","_meta":{"b":[true]},"content":{"type":"text","text":"hm","annotations":{"priority":0.5}}}}`, true},
		{"user with id", `{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","messageId":"0b6c7a52-2f39-4d6e-9d55-3c1f2f6a8e11","content":{"type":"text","text":"do it"}}}`, true},
		{"escapes", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\"b\\n\u00e9\n"}}}`, true},
		{"image", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}}`, false},
		{"unknown member", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","future":1}}}`, false},
		{"unknown kind", `{"sessionId":"s","update":{"sessionUpdate":"mystery_kind","content":{"type":"text","text":"x"}}}`, false},
		{"tool call", `{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read","status":"pending"}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, fast := decodeTextChunk(json.RawMessage(tt.params))
			if fast != tt.fast {
				t.Errorf("decoded as a text chunk: %v, want %v", fast, tt.fast)
			}
			got, err := decodeUpdate(json.RawMessage(tt.params))
			var want sdk.SessionNotification
			werr := json.Unmarshal([]byte(tt.params), &want)
			if (err == nil) != (werr == nil) {
				t.Fatalf("err = %v, the SDK's %v", err, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%#v\nthe SDK decodes\n%#v", got, want)
			}
		})
	}
}

// TestStdoutReader checks what the SDK is handed of an agent's output:
// every line but the session updates, which go to the mailbox, in order.
func TestStdoutReader(t *testing.T) {
	update := func(text string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
	}
	lines := []string{
		update("one"),
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`not JSON`,
		`{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"two"}}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/update","params":{}}`, // a request, however odd: the SDK answers it
		update("three"),
		`{"jsonrpc":"2.0","method":"_ext/note","params":{}}`,
	}
	var posted []string
	r := newStdoutReader(strings.NewReader(strings.Join(lines, "\n")+"\n"+update("last")), func(p json.RawMessage) {
		n, err := decodeUpdate(p)
		if err != nil {
			t.Errorf("posted %s: %v", p, err)
		}
		posted = append(posted, n.Update.AgentMessageChunk.Content.Text.Text)
	})
	passed, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{lines[1], lines[2], lines[4], lines[6]}, "\n") + "\n"
	if string(passed) != want {
		t.Errorf("passed on\n%s\nwant\n%s", passed, want)
	}
	if !slices.Equal(posted, []string{"one", "two", "three", "last"}) {
		t.Errorf("posted %q", posted)
	}
	if r.failure() != nil {
		t.Errorf("failure() = %v at the end of the output", r.failure())
	}
}

// TestStdoutReaderLineTooLong: a line longer than maxLine ends the reading
// with errLineTooLong, once what came before has been passed on, and
// without holding the whole line.
func TestStdoutReaderLineTooLong(t *testing.T) {
	first := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	huge := io.MultiReader(strings.NewReader(first), strings.NewReader(`{"jsonrpc":"2.0","method":"session/update","params":"`), endless{})
	r := newStdoutReader(huge, func(json.RawMessage) { t.Error("a session update was posted") })
	passed, err := io.ReadAll(r)
	if !errors.Is(err, errLineTooLong) || !errors.Is(r.failure(), errLineTooLong) {
		t.Errorf("err = %v, failure() = %v; want errLineTooLong", err, r.failure())
	}
	if string(passed) != first {
		t.Errorf("passed on %.80q", passed)
	}
}

// endless reads as x without end.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
