package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// waiting reports whether the chat's running turn waits on somebody.
func waiting(cs *protocol.ChatState) bool { return cs.Status.Activity() == protocol.StatusInputNeeded }

var hiddenRequest = regexp.MustCompile(`name="request" value="([^"]+)"`)
var hiddenToolCall = regexp.MustCompile(`name="toolCall" value="([^"]+)"`)

// TestAnswerAndApproveForms answers a script session's question and
// approves its write through the session page's forms, as a member
// without JavaScript would: the forms are there only for who may use
// them, need the CSRF token, and say what went wrong with what is not
// waiting any more.
func TestAnswerAndApproveForms(t *testing.T) {
	e := newEnv(t, envOptions{})
	mo := e.conn("mo")
	// Shared with the team, so the guest may read it.
	uri, chat := e.startSessionWith(t, mo, "forms", "answer me", "ask Which file?\nwrite notes.txt hi", teamShared)
	waitChat(t, mo, chat, waiting)
	page := "/ui/session?uri=" + url.QueryEscape(uri)

	gus := e.signIn("gus")
	r := gus.get(page)
	if r.status != http.StatusOK || strings.Contains(r.body, `action="/ui/session/answer"`) || !strings.Contains(r.body, "Waiting for an answer.") {
		t.Fatalf("the guest's page: %d %s", r.status, r.body)
	}
	mob := e.signIn("mo")
	r = mob.get(page)
	m := hiddenRequest.FindStringSubmatch(r.body)
	if m == nil || !strings.Contains(r.body, `name="q.answer"`) || !strings.Contains(r.body, `<label for="q-`) {
		t.Fatalf("the member's page has no answer form: %s", r.body)
	}
	form := url.Values{"uri": {uri}, "chat": {chat}, "request": {m[1]}, "q.answer": {"notes.txt"}, "response": {"accept"}}
	form.Set("csrf", gus.csrf())
	if r := gus.post("/ui/session/answer", form); r.status != http.StatusForbidden || !strings.Contains(r.body, "chat:answer") {
		t.Fatalf("a guest's answer: %d %s", r.status, r.body)
	}
	form.Set("csrf", "nope")
	if r := mob.post("/ui/session/answer", form); r.status != http.StatusForbidden {
		t.Fatalf("an answer without the CSRF token: %d", r.status)
	}
	form.Set("csrf", mob.csrf())
	empty := url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "request": {m[1]}, "response": {"accept"}}
	if r := mob.post("/ui/session/answer", empty); r.status != http.StatusBadRequest || !strings.Contains(r.body, "is missing, and the question is required") {
		t.Fatalf("an empty answer to a required question: %d %s", r.status, r.body)
	}
	if r := mob.post("/ui/session/answer", form); r.status != http.StatusSeeOther {
		t.Fatalf("the member's answer: %d %s", r.status, r.body)
	}
	if r := mob.post("/ui/session/answer", form); r.status != http.StatusNotFound || !strings.Contains(r.body, "answered that already") {
		t.Fatalf("answering twice: %d %s", r.status, r.body)
	}

	// The write waits for approval: buttons for the member only.
	waitChat(t, mo, chat, waiting)
	if r := gus.get(page); strings.Contains(r.body, `action="/ui/session/confirm"`) || !strings.Contains(r.body, "Waiting for approval.") {
		t.Fatalf("the guest is offered the approval: %s", r.body)
	}
	r = mob.get(page)
	tc := hiddenToolCall.FindStringSubmatch(r.body)
	// The host's options, as the buttons: allow in this session, allow once, deny.
	if tc == nil || !strings.Contains(r.body, `name="option" value="allow-session"`) || !strings.Contains(r.body, `name="option" value="allow-once"`) ||
		!strings.Contains(r.body, `name="option" value="deny"`) {
		t.Fatalf("the member's page has no approval buttons: %s", r.body)
	}
	confirm := url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "chat": {chat}, "toolCall": {tc[1]}}
	confirm.Set("decision", "perhaps")
	if r := mob.post("/ui/session/confirm", confirm); r.status != http.StatusBadRequest {
		t.Fatalf("a decision that is none: %d %s", r.status, r.body)
	}
	confirm.Set("decision", "approve")
	if r := mob.post("/ui/session/confirm", confirm); r.status != http.StatusSeeOther {
		t.Fatalf("the member's approval: %d %s", r.status, r.body)
	}
	waitChat(t, mo, chat, idle)
	cs := mo.State(chat).(*protocol.ChatState)
	if turn := cs.Turns[len(cs.Turns)-1]; turn.State != protocol.TurnStateComplete || !strings.Contains(partsText(turn.ResponseParts), "notes.txt") {
		t.Fatalf("the turn: %s %+v", turn.State, turn.ResponseParts)
	}
	if r := mob.post("/ui/session/confirm", confirm); r.status != http.StatusConflict || !strings.Contains(r.body, "has ended") {
		t.Fatalf("approving after the turn ended: %d %s", r.status, r.body)
	}
	if r := mob.get(page); strings.Contains(r.body, `action="/ui/session/answer"`) || strings.Contains(r.body, `action="/ui/session/confirm"`) {
		t.Errorf("an ended turn offers forms: %s", r.body)
	}

	// Declined, and denied.
	send(t, mo, chat, "t2", "ask Your name?\nwrite other.txt x")
	waitChat(t, mo, chat, waiting)
	m = hiddenRequest.FindStringSubmatch(mob.get(page).body)
	if r := mob.post("/ui/session/answer", url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "request": {m[1]}, "response": {"decline"}}); r.status != http.StatusSeeOther {
		t.Fatalf("declining: %d %s", r.status, r.body)
	}
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool {
		return waiting(cs) && strings.Contains(partsText(cs.ActiveTurn.ResponseParts), "No answer was given")
	})
	tc = hiddenToolCall.FindStringSubmatch(mob.get(page).body)
	if r := mob.post("/ui/session/confirm", url.Values{"csrf": {mob.csrf()}, "uri": {uri}, "toolCall": {tc[1]}, "decision": {"deny"}}); r.status != http.StatusSeeOther {
		t.Fatalf("denying: %d %s", r.status, r.body)
	}
	waitChat(t, mo, chat, func(cs *protocol.ChatState) bool { return idle(cs) && len(cs.Turns) == 2 })
}

// partsText is the markdown a turn's parts wrote.
func partsText(parts []protocol.ResponsePart) string {
	var b strings.Builder
	for _, p := range parts {
		if m, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}
