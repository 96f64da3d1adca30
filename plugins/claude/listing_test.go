package claude

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

func TestListName(t *testing.T) {
	for name, want := range map[string]string{
		"0b1e.jsonl":       "0b1e",
		"agent-0b1e.jsonl": "",
		".hidden.jsonl":    "",
		".jsonl":           "",
		"notes.txt":        "",
	} {
		id, ok := listFormat{}.Name(name)
		if id != want || ok != (want != "") {
			t.Errorf("Name(%q) = %q, %v", name, id, ok)
		}
	}
}

func TestListLine(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	ts := at.Format(time.RFC3339Nano)
	user := func(content string) string {
		return `{"type":"user","cwd":"/src/app","gitBranch":"main","timestamp":"` + ts + `","message":{"role":"user","content":` + content + `}}`
	}
	cases := []struct {
		name       string
		line       string
		cut        bool
		want       plugins.TranscriptLine
		wantGarble bool
	}{
		{name: "a prompt", line: user(`"  fix the build  "`),
			want: plugins.TranscriptLine{First: at, Last: at, Cwd: "/src/app", Branch: "main", Prompt: "fix the build", Conversation: true}},
		{name: "a slash command, then a tagged text", line: user(`[{"type":"text","text":"<command-name>/review</command-name>"},{"type":"text","text":"<ide_opened_file>x</ide_opened_file>"}]`),
			want: plugins.TranscriptLine{First: at, Last: at, Cwd: "/src/app", Branch: "main", Command: "/review", Conversation: true}},
		{name: "a shell command", line: user(`[{"type":"text","text":"<bash-input> ls </bash-input>"}]`),
			want: plugins.TranscriptLine{First: at, Last: at, Cwd: "/src/app", Branch: "main", Prompt: "! ls", Conversation: true}},
		{name: "a tool result is no prompt", line: user(`[{"type":"tool_result","content":"ok"},{"type":"text","text":"hi"}]`),
			want: plugins.TranscriptLine{First: at, Last: at, Cwd: "/src/app", Branch: "main", Conversation: true}},
		{name: "a subagent's line", line: `{"type":"assistant","isSidechain":true,"timestamp":"` + ts + `"}`,
			want: plugins.TranscriptLine{First: at, Last: at}},
		{name: "titles, texts as written", line: `{"type":"custom-title","customTitle":" Renamed ","lastPrompt":"p","summary":""}`,
			want: func() (l plugins.TranscriptLine) {
				l.SetTitle(plugins.CustomTitle, " Renamed ")
				l.SetTitle(plugins.LastPrompt, "p")
				l.SetTitle(plugins.SummaryTitle, "")
				return l
			}()},
		{name: "a title glued to a line cut short", line: `{"type":"user","message":{"content":"cu{"type":"ai-title","aiTitle":"Glued"}`,
			want: func() (l plugins.TranscriptLine) { l.SetTitle(plugins.AITitle, "Glued"); return l }()},
		{name: "a line cut short gives what precedes the cut", cut: true, line: strings.TrimSuffix(user(`"the prompt"`), "}}"),
			want: plugins.TranscriptLine{First: at, Last: at, Cwd: "/src/app", Branch: "main", Prompt: "the prompt", Conversation: true}},
		{name: "garbage", line: `not json`, wantGarble: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := listFormat{}.Line([]byte(tc.line), tc.cut, true)
			if ok == tc.wantGarble {
				t.Fatalf("ok = %v", ok)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestListSkip(t *testing.T) {
	big := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"no members here"}]},"uuid":"u"}`)
	titled := []byte(`{"type":"ai-title","aiTitle":"T"}`)
	stamped := []byte(`{"type":"assistant","timestamp":"2026-03-01T09:00:00Z","gitBranch":"main"}`)
	for _, tc := range []struct {
		line    []byte
		lacking plugins.Facts
		skip    bool
	}{
		{big, plugins.FactModified | plugins.FactTitles, true},
		{titled, plugins.FactAITitle, false},
		{titled, plugins.FactCustomTitle, true},
		{stamped, plugins.FactModified, false},
		{stamped, plugins.FactBranch, false},
		{stamped, plugins.FactTitles, true},
		{stamped, 0, true},
		// Facts the tail does not look for ask for nothing.
		{stamped, plugins.FactCreated | plugins.FactPrompt, true},
	} {
		if got := (listFormat{}).Skip(tc.line, tc.lacking); got != tc.skip {
			t.Errorf("Skip(%s, %b) = %v", tc.line, tc.lacking, got)
		}
	}
}

// TestTurnsOfCorpus reads back the turns of a transcript as the CLI
// writes them (corpus.Session): the one reader of a Claude transcript's
// turns, which the host uses for an external session too.
func TestTurnsOfCorpus(t *testing.T) {
	projects := t.TempDir()
	s := &corpus.Session{
		ID: "00000000-0000-4000-8000-000000000001", Cwd: "/src/turns", Branch: "main",
		Start:   time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		Prompts: []string{"first", "second", "third", "fourth", "fifth"},
		Tools:   true, Meta: true, Interrupt: true, AITitle: "Five turns",
		PadTo: 3 << 20, // large replies after the first turn
	}
	path, err := corpus.Create(projects, s)
	if err != nil {
		t.Fatal(err)
	}
	turns, err := readTranscript(context.Background(), path, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, turn := range turns {
		texts = append(texts, turn.Message.Text)
	}
	if !slices.Equal(texts, s.Prompts) {
		t.Fatalf("turns %q, want %q", texts, s.Prompts)
	}
	second := turns[1]
	if second.StartedAt == nil || second.Duration == nil || *second.Duration <= 0 || second.State != protocol.TurnStateComplete {
		t.Errorf("second turn %+v", second)
	}
	if second.Usage == nil || second.Usage.Model == nil || *second.Usage.OutputTokens <= 0 {
		t.Errorf("usage %+v", second.Usage)
	}
	// thinking, text and tool_use share a message id, one line each; the
	// tool result completes the call; a second reply follows.
	var kinds []string
	for _, p := range second.ResponseParts {
		switch p := p.(type) {
		case *protocol.ReasoningResponsePart:
			kinds = append(kinds, "reasoning")
		case *protocol.MarkdownResponsePart:
			kinds = append(kinds, "markdown:"+p.Content)
		case *protocol.ToolCallResponsePart:
			done, ok := p.ToolCall.(*protocol.ToolCallCompletedState)
			if !ok {
				t.Fatalf("tool call %T", p.ToolCall)
			}
			if !done.Success || done.ToolName != "Bash" {
				t.Errorf("tool call %+v", done)
			}
			kinds = append(kinds, "tool:"+done.ToolName)
		}
	}
	want := []string{"reasoning", "markdown:I'll look into it.", "tool:Bash", "markdown:Done with step 2."}
	if !slices.Equal(kinds, want) {
		t.Errorf("parts %q, want %q", kinds, want)
	}
	if last := turns[4]; last.State != protocol.TurnStateCancelled {
		t.Errorf("interrupted turn is %s", last.State)
	}
}
