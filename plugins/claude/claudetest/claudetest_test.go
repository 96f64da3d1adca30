package claudetest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/plugins/claude/claudetest"
)

const request = `{"model":"claude-test","max_tokens":100,"stream":%s,"messages":[
	{"role":"user","content":"first"},
	{"role":"assistant","content":[{"type":"text","text":"answer"}]},
	{"role":"user","content":[{"type":"text","text":"<system-reminder>ignore me</system-reminder>"},{"type":"text","text":"second"},{"type":"text","text":"<system-reminder>me too</system-reminder>"}]}]}`

func post(t *testing.T, s *claudetest.Server, stream string) *http.Response {
	t.Helper()
	body := strings.Replace(request, "%s", stream, 1)
	resp, err := http.Post(s.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestStream(t *testing.T) {
	s := claudetest.NewServer()
	defer s.Close()
	s.Enqueue(claudetest.Response{Blocks: []claudetest.Block{
		{Type: "thinking", Text: "hmm"},
		{Type: "text", Text: "hello world"},
		{Type: "tool_use", ID: "toolu_1", Name: "Write", Input: map[string]string{"file_path": "/a"}},
	}, ChunkSize: 4})

	resp := post(t, s, "true")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var events []string
	var text, input strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if event, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, event)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct {
				Delta struct {
					Text        string `json:"text"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			json.Unmarshal([]byte(data), &ev)
			text.WriteString(ev.Delta.Text)
			input.WriteString(ev.Delta.PartialJSON)
		}
	}
	if events[0] != "message_start" || events[len(events)-1] != "message_stop" || events[len(events)-2] != "message_delta" {
		t.Errorf("events = %q", events)
	}
	if text.String() != "hello world" || input.String() != `{"file_path":"/a"}` {
		t.Errorf("text %q, input %q", text.String(), input.String())
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.UserText() != "second" || r.Model != "claude-test" || !r.Stream || r.FirstByte().IsZero() {
		t.Errorf("request = %+v, user text %q", r, r.UserText())
	}
	if got := strings.Join(r.Texts(), "|"); got != "user: first|assistant: answer|user: second" {
		t.Errorf("Texts = %q", got)
	}
}

func TestNotStreaming(t *testing.T) {
	s := claudetest.NewServer()
	defer s.Close()
	resp := post(t, s, "false")
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != claudetest.Fallback {
		t.Errorf("reply = %+v", msg)
	}
}

func TestError(t *testing.T) {
	s := claudetest.NewServer()
	defer s.Close()
	s.Enqueue(claudetest.Error("nope"))
	if resp := post(t, s, "true"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status = %d", resp.StatusCode)
	}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, s.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s / = %v, %v", method, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}
