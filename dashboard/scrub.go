package dashboard

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/timeline"
)

// The timeline as a person reads it: each event labelled in words
// ("turn 3: fix the build", "asked: Which branch?", "wrote notes.txt"),
// chats called by their titles, and a scrubber over the events (a
// select of them, oldest first, that a slider drives where script
// runs) that shows the session right after the one picked, its
// checkpoints as they were then.

// scrubPoint is an event the scrubber can stop at.
type scrubPoint struct {
	Seq     int64
	Label   string
	Current bool
}

// chatTitles names a session's chats by their titles.
func chatTitles(ss *protocol.SessionState) map[string]string {
	out := map[string]string{}
	if ss == nil {
		return out
	}
	for _, ch := range ss.Chats {
		title := strings.TrimSpace(ch.Title)
		if title == "" {
			title = "the chat"
			if ss.DefaultChat != nil && ch.Resource == *ss.DefaultChat {
				title = "the default chat"
			}
		} else {
			title = "“" + title + "”"
		}
		out[ch.Resource] = title
	}
	return out
}

// chatURI matches a chat's URI in an event's text.
var chatURI = regexp.MustCompile(`ahp-chat://[^\s"'<>]+`)

// withTitles puts each chat URI in s as its chat's title.
func withTitles(s string, titles map[string]string) string {
	return chatURI.ReplaceAllStringFunc(s, func(uri string) string {
		if t, ok := titles[uri]; ok {
			return t
		}
		return "another chat"
	})
}

// plainText is a markdown text without its code marks.
func plainText(s string) string { return strings.ReplaceAll(s, "`", "") }

// lowerFirst lowers a text's first letter: "Wrote x" reads "wrote x".
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || !unicode.IsUpper(r) {
		return s
	}
	// An acronym or a name (two capitals) stays.
	if r2, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(r2) {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

// labelOf says what an event was, in words.
func labelOf(e timeline.Event, ix turnIndex, titles map[string]string) string {
	text := withTitles(strings.TrimSpace(e.Text), titles)
	turn := ""
	if n, ok := ix.turnNo[turnKey(e.Channel, e.TurnID)]; ok && e.TurnID != "" {
		turn = "turn " + strconv.Itoa(n)
	}
	or := func(s, dflt string) string {
		if s == "" {
			return dflt
		}
		return s
	}
	with := func(head, tail string) string {
		if tail == "" {
			return head
		}
		return head + ": " + tail
	}
	switch e.Kind {
	case timeline.TurnStarted:
		if text == "resumed" {
			return or(turn, "a turn") + " resumed"
		}
		return with(or(turn, "a turn"), shorten(text, 80))
	case timeline.TurnCompleted:
		return or(turn, "a turn") + " completed"
	case timeline.TurnCancelled:
		return or(turn, "a turn") + " cancelled"
	case timeline.TurnFailed:
		return with(or(turn, "a turn")+" failed", shorten(text, 80))
	case timeline.HumanInput:
		if ix.messages[turnKey(e.Channel, e.TurnID)] == e.Text && e.TurnID != "" {
			return with("sent", shorten(text, 80))
		}
		return shorten(text, 80)
	case timeline.Question:
		return with("asked", shorten(text, 80))
	case timeline.ToolCall:
		return with("called a tool", shorten(plainText(text), 80))
	case timeline.ToolResult:
		return or(lowerFirst(shorten(plainText(text), 80)), "a tool finished")
	case timeline.Artifact:
		if rest, ok := strings.CutPrefix(text, "works in "); ok {
			return "works in " + folderOf(rest)
		}
		return or(lowerFirst(shorten(plainText(text), 80)), "edited files")
	case timeline.LLMCall:
		return with("a model call", text)
	case timeline.Transition:
		return shorten(text, 80)
	case timeline.Sleep:
		return "fell asleep"
	case timeline.Wake:
		return "woke"
	}
	return shorten(text, 80)
}

// label fills the timeline's labels and scrubber from the session's
// turns and its chats' titles.
func (tv *timelineView) label(ix turnIndex, titles map[string]string, at int64) {
	for i := range tv.Events {
		ev := &tv.Events[i]
		ev.Label = labelOf(ev.event, ix, titles)
	}
	// Oldest first, as a slider runs; one point for the events of one
	// action (a turn's start and its message, a tool's result and its
	// edit), which the state after it is the same for.
	for i := len(tv.Events) - 1; i >= 0; i-- {
		ev := tv.Events[i]
		if n := len(tv.Points); n > 0 && tv.Points[n-1].Seq == ev.Seq {
			p := &tv.Points[n-1]
			if ev.Kind != string(timeline.HumanInput) && !strings.HasSuffix(p.Label, " · "+ev.Label) && !strings.Contains(p.Label, " · "+ev.Label+"; ") {
				p.Label += "; " + ev.Label
			}
			continue
		}
		tv.Points = append(tv.Points, scrubPoint{Seq: ev.Seq, Label: ev.Time + " · " + ev.Label, Current: ev.Seq == at})
	}
	tv.At = at
}

// checkpointsThen keeps the checkpoints a session had right after the
// event numbered at: turn N's once N turns had ended, turn 0 once the
// first had started.
func checkpointsThen(cv checkpointsView, ix turnIndex, at int64) checkpointsView {
	if cv.Note != "" {
		return cv
	}
	n := ix.checkpointsAt(at)
	var keep []checkpointView
	for _, cp := range cv.List {
		if cp.Turn <= n && (cp.Turn > 0 || (ix.firstStart >= 0 && ix.firstStart <= at)) {
			keep = append(keep, cp)
		}
	}
	cv.List = keep
	cv.Then = true
	cv.ThenCount = len(keep)
	return cv
}

// currentLabel is what the event the page is replayed at was, with its
// time; "" when the timeline shown does not hold it.
func (tv timelineView) currentLabel() string {
	for _, p := range tv.Points {
		if p.Current {
			return p.Label
		}
	}
	return ""
}
