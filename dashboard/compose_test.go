package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// readShared is the config of a person's session others may read only.
var readShared = protocol.Object{"sharing": jsontext.Value(`"read"`)}

// texts is every turn's message in the chat, queued and steering ones
// after the rest.
func texts(cs *protocol.ChatState) []string {
	var out []string
	for _, t := range cs.Turns {
		out = append(out, t.Message.Text)
	}
	if cs.ActiveTurn != nil {
		out = append(out, cs.ActiveTurn.Message.Text)
	}
	for _, q := range cs.QueuedMessages {
		out = append(out, q.Message.Text)
	}
	return out
}

// replyOf is what the agent said in a turn.
func replyOf(t protocol.Turn) string {
	var b strings.Builder
	for _, p := range t.ResponseParts {
		if m, ok := p.(*protocol.MarkdownResponsePart); ok {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// TestComposer sends messages from the session page's composer: a new
// turn, one queued while it runs, a steering message that ends its wait,
// then a turn cancelled; and makes a second chat, shown as a tab.
func TestComposer(t *testing.T) {
	e := newEnv(t, envOptions{})
	root := e.conn("root")
	uri, chat := e.startSessionWith(t, root, "talk", "a conversation", "say first", bypass)
	waitChat(t, root, chat, idle)
	b := e.signIn("root")
	csrf := b.csrf()
	page := b.get("/ui/session?uri=" + url.QueryEscape(uri))
	for _, want := range []string{`action="/ui/session/send"`, `name="mode" value="steer"`, `action="/ui/session/chat"`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the session page has no %s", want)
		}
	}
	// A replay, the session as it was, takes no messages.
	seq := regexp.MustCompile(`data-seq="(\d+)"`).FindStringSubmatch(page.body)
	if seq == nil {
		t.Fatal("the session page's timeline has no events")
	}
	if replay := b.get("/ui/session?at=" + seq[1] + "&uri=" + url.QueryEscape(uri)); replay.status != http.StatusOK || strings.Contains(replay.body, `action="/ui/session/send"`) {
		t.Fatalf("a replay offers the composer: %d", replay.status)
	}
	post := func(path string, form url.Values) response {
		t.Helper()
		form.Set("csrf", csrf)
		form.Set("uri", uri)
		resp := b.post(path, form)
		if resp.status != http.StatusSeeOther {
			t.Fatalf("POST %s %v: %d %s", path, form, resp.status, resp.body)
		}
		return resp
	}
	post("/ui/session/send", url.Values{"chat": {chat}, "text": {"say second\nwait 30s"}, "mode": {"send"}})
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool {
		return cs.ActiveTurn != nil && cs.ActiveTurn.Message.Text == "say second\nwait 30s"
	})
	post("/ui/session/send", url.Values{"chat": {chat}, "text": {"say third, queued"}, "mode": {"send"}})
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool {
		return len(cs.QueuedMessages) == 1 && cs.QueuedMessages[0].Message.Text == "say third, queued"
	})
	if cs := root.State(chat).(*protocol.ChatState); cs.ActiveTurn == nil {
		t.Fatal("the turn ended before it was steered")
	}
	// Steered, the wait ends and the turn says it; the queued message
	// then runs as the next turn.
	post("/ui/session/send", url.Values{"chat": {chat}, "text": {"say steered"}, "mode": {"steer"}})
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool {
		return cs.ActiveTurn == nil && len(cs.QueuedMessages) == 0 && len(cs.Turns) == 3
	})
	cs := root.State(chat).(*protocol.ChatState)
	if got := texts(cs); strings.Join(got, "|") != "say first|say second\nwait 30s|say third, queued" {
		t.Fatalf("the turns are %q", got)
	}
	if !strings.Contains(replyOf(cs.Turns[1]), "steered") || cs.Turns[1].State != protocol.TurnStateComplete {
		t.Fatalf("the steered turn ended %s saying %q", cs.Turns[1].State, replyOf(cs.Turns[1]))
	}
	if !strings.Contains(replyOf(cs.Turns[2]), "third, queued") {
		t.Fatalf("the queued turn says %q", replyOf(cs.Turns[2]))
	}
	// A turn cancelled from the page.
	post("/ui/session/send", url.Values{"chat": {chat}, "text": {"wait 30s"}})
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool { return cs.ActiveTurn != nil })
	post("/ui/session/action", url.Values{"chat": {chat}, "op": {"cancel"}})
	waitChat(t, root, chat, func(cs *protocol.ChatState) bool {
		return cs.ActiveTurn == nil && len(cs.Turns) == 4 && cs.Turns[3].State == protocol.TurnStateCancelled
	})
	// Nothing typed is refused, saying so.
	form := url.Values{"csrf": {csrf}, "uri": {uri}, "text": {"  \n"}}
	if resp := b.post("/ui/session/send", form); resp.status != http.StatusBadRequest || !strings.Contains(resp.body, "Write a message first.") {
		t.Fatalf("an empty message: %d %s", resp.status, resp.body)
	}

	// A second chat, with a first message, is the page's second tab.
	resp := post("/ui/session/chat", url.Values{"text": {"say in the second chat"}})
	loc, err := url.Parse(resp.header.Get("Location"))
	if err != nil || loc.Query().Get("chat") == "" || loc.Query().Get("uri") != uri {
		t.Fatalf("the new chat's page is %q (%v)", resp.header.Get("Location"), err)
	}
	second := loc.Query().Get("chat")
	if _, err := root.Subscribe(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	waitChat(t, root, second, idle)
	if got := replyOf(root.State(second).(*protocol.ChatState).Turns[0]); !strings.Contains(got, "in the second chat") {
		t.Fatalf("the second chat's turn says %q", got)
	}
	page = b.get(loc.RequestURI())
	if n := strings.Count(page.body, `<a href="/ui/session?`); n < 2 {
		t.Fatalf("the second chat's page shows %d tabs:\n%s", n, page.body)
	}
	if !strings.Contains(page.body, `aria-current="page">Chat 2</a>`) || !strings.Contains(page.body, "in the second chat") {
		t.Fatalf("the second chat's page does not show it as the current tab:\n%s", page.body)
	}
	if !strings.Contains(page.body, `name="chat" value="`+second+`"`) {
		t.Fatal("the second chat's composer does not send to it")
	}
}

// TestComposerRefused shows that a guest, and another member (max) a
// session is shared with for reading only, get no composer and no new-chat form,
// and that the host refuses what they post anyway; a member of a
// session shared with the team gets both.
func TestComposerRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	root, mo := e.conn("root"), e.conn("mo")
	team, teamChat := e.startSessionWith(t, mo, "team", "the team's", "say hello", teamShared)
	read, readChat := e.startSessionWith(t, mo, "read", "read only", "say hello", readShared)
	for _, c := range []string{teamChat, readChat} {
		if _, err := root.Subscribe(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	waitChat(t, root, teamChat, idle)
	waitChat(t, root, readChat, idle)
	for _, c := range []struct {
		who, uri string
		may      bool
	}{{"gus", team, false}, {"gus", read, false}, {"max", read, false}, {"max", team, true}} {
		b := e.signIn(c.who)
		page := b.get("/ui/session?uri=" + url.QueryEscape(c.uri))
		if page.status != http.StatusOK {
			t.Fatalf("%s's page of %s: %d %s", c.who, c.uri, page.status, page.body)
		}
		has := strings.Contains(page.body, `action="/ui/session/send"`)
		hasChat := strings.Contains(page.body, `action="/ui/session/chat"`)
		if has != c.may || hasChat != c.may {
			t.Fatalf("%s on %s: composer %v, new chat %v; want %v", c.who, c.uri, has, hasChat, c.may)
		}
		if c.may {
			continue
		}
		csrf := b.csrf()
		for _, p := range []struct {
			path string
			form url.Values
		}{
			{"/ui/session/send", url.Values{"text": {"say nope"}}},
			{"/ui/session/send", url.Values{"text": {"say nope"}, "mode": {"steer"}}},
			{"/ui/session/chat", url.Values{"text": {"say nope"}}},
		} {
			p.form.Set("csrf", csrf)
			p.form.Set("uri", c.uri)
			if resp := b.post(p.path, p.form); resp.status != http.StatusForbidden {
				t.Fatalf("%s posting %s to %s: %d %s", c.who, p.path, c.uri, resp.status, resp.body)
			}
		}
	}
	// Past the dashboard's own check, the host refuses them too.
	gus := e.conn("gus")
	msg := protocol.Message{Text: "say nope", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	if _, err := gus.Subscribe(context.Background(), teamChat); err != nil {
		t.Fatal(err)
	}
	if err := gus.DispatchWait(context.Background(), teamChat, &protocol.ChatTurnStartedAction{TurnID: "nope", StartedAt: client.Now(), Message: msg}); err == nil {
		t.Fatal("the host let a guest start a turn")
	}
	for _, c := range []string{teamChat, readChat} {
		if got := texts(root.State(c).(*protocol.ChatState)); len(got) != 1 {
			t.Fatalf("%s has the turns %q", c, got)
		}
	}
}
