package catalogue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/catalogue/corpus"
)

// TestTitles builds transcripts with each kind of title line at each
// place (the start, after the first turn, the middle, near the end, the
// end), small enough that both windows hold all of it and large enough
// that the middle lies outside both, plus mixes that test the ranking;
// each row's title must be the one the Claude Agent SDK's session list
// shows, as sdkTitles (a plain reading of its rules) works it out from
// the file, and the read must stay within the windows.
func TestTitles(t *testing.T) {
	projects := t.TempDir()
	type tcase struct {
		name string
		s    corpus.Session
	}
	var cases []tcase
	places := []corpus.Place{corpus.AtStart, corpus.AfterFirstTurn, corpus.Middle, corpus.NearEnd, corpus.AtEnd}
	kinds := []string{corpus.AITitle, corpus.CustomTitle, corpus.SummaryLine}
	sizes := []struct {
		name string
		pad  int64
	}{{"small", 0}, {"400KB", 400 << 10}}
	for _, size := range sizes {
		for _, kind := range kinds {
			for _, at := range places {
				cases = append(cases, tcase{
					name: fmt.Sprintf("%s %s %s", size.name, kind, at),
					s: corpus.Session{PadTo: size.pad, Titles: []corpus.TitleLine{
						{Kind: kind, Text: kind + " " + at.String(), At: at},
					}},
				})
			}
		}
		mixes := []struct {
			name   string
			titles []corpus.TitleLine
		}{
			{"custom at start beats AI at end", []corpus.TitleLine{
				{Kind: corpus.CustomTitle, Text: "Renamed", At: corpus.AtStart},
				{Kind: corpus.AITitle, Text: "Generated", At: corpus.AtEnd}}},
			{"newest AI title wins", []corpus.TitleLine{
				{Kind: corpus.AITitle, Text: "First", At: corpus.AfterFirstTurn},
				{Kind: corpus.AITitle, Text: "Second", At: corpus.NearEnd}}},
			{"tail custom beats head custom", []corpus.TitleLine{
				{Kind: corpus.CustomTitle, Text: "Old name", At: corpus.AfterFirstTurn},
				{Kind: corpus.CustomTitle, Text: "New name", At: corpus.AtEnd}}},
			{"empty custom title falls through", []corpus.TitleLine{
				{Kind: corpus.AITitle, Text: "Generated", At: corpus.AfterFirstTurn},
				{Kind: corpus.CustomTitle, Text: "", At: corpus.AtEnd}}},
			{"summary and AI title", []corpus.TitleLine{
				{Kind: corpus.SummaryLine, Text: "Summary", At: corpus.AtStart},
				{Kind: corpus.AITitle, Text: "Generated", At: corpus.Middle}}},
		}
		for _, m := range mixes {
			cases = append(cases, tcase{name: size.name + " " + m.name, s: corpus.Session{PadTo: size.pad, Titles: m.titles}})
		}
	}
	// A title near the end that a huge last line pushes out of the tail
	// window: only the head's is seen.
	cases = append(cases, tcase{name: "huge last line", s: corpus.Session{PadTo: 400 << 10, HugeLast: 200 << 10,
		Titles: []corpus.TitleLine{
			{Kind: corpus.AITitle, Text: "Head title", At: corpus.AfterFirstTurn},
			{Kind: corpus.AITitle, Text: "Hidden title", At: corpus.NearEnd}}}})
	// No last-prompt line (the CLI writes none before a huge last line):
	// a summary line, then the first prompt, title the session.
	cases = append(cases, tcase{name: "summary without last prompt", s: corpus.Session{HugeLast: 1 << 10,
		Titles: []corpus.TitleLine{{Kind: corpus.SummaryLine, Text: "Summary", At: corpus.AtEnd}}}})
	cases = append(cases, tcase{name: "first prompt only", s: corpus.Session{HugeLast: 1 << 10}})

	paths := map[string]string{}
	for i := range cases {
		s := &cases[i].s
		s.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		s.Cwd, s.Branch, s.Start = "/src/titles", "main", base
		s.Prompts = []string{fmt.Sprintf("first prompt %d", i), "second prompt", fmt.Sprintf("last prompt %d", i)}
		s.Tools = true
		// A first turn that read files, as the CLI's are: what comes
		// after it lies past the head's first read.
		s.FirstTurn = 20 << 10
		paths[s.ID] = create(t, projects, s)
	}

	c := open(t, Config{Roots: claudeAt(projects), RescanInterval: -1, Workers: 1})
	var windows int64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(paths[tc.s.ID])
			if err != nil {
				t.Fatal(err)
			}
			windows += min(int64(len(data)), headMax+tailMax+1)
			want := sdkTitles(data)
			r := lookup(t, c, providerClaude, tc.s.ID)
			if r.Title != want.title {
				t.Errorf("title %q, want %q", r.Title, want.title)
			}
			if got, w := r.DisplayTitle(), firstOf(want.title, want.lastPrompt, want.summary, tc.s.Prompts[0]); got != w {
				t.Errorf("display title %q, want %q", got, w)
			}
			if r.FirstPrompt != tc.s.Prompts[0] {
				t.Errorf("first prompt %q", r.FirstPrompt)
			}
		})
	}
	// The oracle must not agree by being blind: the placements it sees
	// and does not see are as the windows say.
	for _, tc := range cases {
		data, err := os.ReadFile(paths[tc.s.ID])
		if err != nil {
			t.Fatal(err)
		}
		want := sdkTitles(data)
		switch tc.name {
		case "400KB ai-title in the middle", "400KB custom-title in the middle":
			if want.title != "" {
				t.Errorf("%s: the oracle sees %q outside the windows", tc.name, want.title)
			}
		case "small ai-title in the middle", "400KB ai-title after first turn", "400KB custom-title near the end":
			if want.title == "" {
				t.Errorf("%s: the oracle sees no title", tc.name)
			}
		case "huge last line":
			if want.title != "Head title" {
				t.Errorf("%s: the oracle sees %q", tc.name, want.title)
			}
		}
	}
	if read := c.Stats().BytesRead; read > windows {
		t.Errorf("read %d bytes, more than the windows' %d", read, windows)
	}
}

// sdkWant is what the SDK's session list finds in a transcript.
type sdkWant struct{ title, lastPrompt, summary string }

// sdkTitles applies the SDK's rules as plainly as they can be put, with
// none of the catalogue's code: the first and last 64 KB, each split into
// lines and read newest first, every line decoded whole.
func sdkTitles(data []byte) sdkWant {
	head := data[:min(len(data), headMax)]
	tail := data[max(0, len(data)-tailMax):]
	newest := func(window []byte, typ, member string) string {
		lines := bytes.Split(window, []byte("\n"))
		for i := len(lines) - 1; i >= 0; i-- {
			var obj map[string]any
			if json.Unmarshal(lines[i], &obj) != nil {
				continue
			}
			if typ != "" && obj["type"] != typ {
				continue
			}
			if s, ok := obj[member].(string); ok {
				return strings.TrimSpace(s)
			}
		}
		return ""
	}
	return sdkWant{
		title: firstOf(
			newest(tail, "custom-title", "customTitle"), newest(head, "custom-title", "customTitle"),
			newest(tail, "ai-title", "aiTitle"), newest(head, "ai-title", "aiTitle")),
		lastPrompt: newest(tail, "", "lastPrompt"),
		summary:    newest(tail, "", "summary"),
	}
}
