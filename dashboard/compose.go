package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Conversing from the session page: the composer under the conversation
// sends a message (a new turn, or one queued behind the turn running) or
// steers the running turn, and the chats' tabs end in a form that makes
// a new chat. Each is a POST with the login's CSRF token, sent through
// the person's own AHP connection as the actions and commands any client
// sends (chat/turnStarted, chat/pendingMessageSet, createChat), so the
// host checks chat:send and chat:create as for anybody; the page offers
// them only to whom the grants allow them.

// composeView is what the composer and the new-chat form need, for the
// person looking at the page; nil offers neither.
type composeView struct {
	CSRF, URI, Chat string
	Send            bool // the grants allow sending: chat:send
	NewChat         bool // and making a chat: chat:create
}

// composerFor says what the person may write from the page: nothing on a
// replay, else what the grants allow. A sleeping session takes messages
// too: the first one wakes it, as from any client.
func (d *Dashboard) composerFor(v viewer, b *sessionBody) *composeView {
	if b.At >= 0 || v.login == nil {
		return nil
	}
	p := v.login.cred.Principal
	may := func(op string) bool {
		need, ok := opOperation(op)
		return ok && d.may(p, need, b.Owner, b.Sharing)
	}
	cv := &composeView{CSRF: v.login.csrf, URI: b.URI, Chat: b.Chat, Send: may("send"), NewChat: may("newchat")}
	if !cv.Send && !cv.NewChat {
		return nil
	}
	return cv
}

// maxMessage bounds a message typed in the composer (the form's own
// bound, maxForm, is the harder one).
const maxMessage = 12 << 10

// readMessage reads the form's message: its text, which may not be only
// white space.
func readMessage(text string, required bool) (string, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	switch {
	case len(text) > maxMessage:
		return "", &pageError{Status: http.StatusRequestEntityTooLarge, Message: "The message is too long: at most 12 KiB."}
	case required && strings.TrimSpace(text) == "":
		return "", &pageError{Status: http.StatusBadRequest, Message: "Write a message first."}
	}
	return text, nil
}

// readTarget reads the session and chat a form names.
func readTarget(uri, chat string) error {
	if len(uri) > maxURI || len(chat) > maxURI {
		return &pageError{Status: http.StatusBadRequest, Message: "That session or chat URI is too long."}
	}
	if _, err := protocol.ParseSessionURI(uri); err != nil {
		return &pageError{Status: http.StatusBadRequest, Message: "That is not a session's URI."}
	}
	return nil
}

// sendAction takes the composer: POST /ui/session/send with the message
// in text and mode send (a new turn, queued when a turn runs) or steer
// (a steering message for the running turn; with none running the host
// starts a turn with it).
func (d *Dashboard) sendAction(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	f := r.PostForm
	uri, chat, mode := f.Get("uri"), f.Get("chat"), f.Get("mode")
	if err := readTarget(uri, chat); err != nil {
		d.fail(w, r, err)
		return
	}
	if mode == "" {
		mode = "send"
	}
	if mode != "send" && mode != "steer" {
		d.fail(w, r, &pageError{Status: http.StatusBadRequest, Message: "mode is send or steer."})
		return
	}
	text, err := readMessage(f.Get("text"), true)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.writeSession(w, r, uri, chat, "send", func(ctx context.Context, c *client.Client) error {
		return sendMessage(ctx, c, uri, chat, text, mode == "steer")
	})
}

// sendMessage sends text to the chat (the session's default when chat
// names none of its chats) as the HTTP API's POST .../turns does: a new
// turn when the chat is idle, else a queued message; or, with steer, a
// steering message.
func sendMessage(ctx context.Context, c *client.Client, uri, chat, text string, steer bool) error {
	chat, cs, err := openChat(ctx, c, uri, chat)
	if err != nil {
		return err
	}
	msg := protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
	id := "ui_" + randomHex(8)
	switch {
	case steer:
		return c.DispatchWait(ctx, chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindSteering, ID: id, Message: msg})
	case cs != nil && cs.ActiveTurn != nil:
		return c.DispatchWait(ctx, chat, &protocol.ChatPendingMessageSetAction{Kind: protocol.PendingMessageKindQueued, ID: id, Message: msg})
	}
	return c.DispatchWait(ctx, chat, &protocol.ChatTurnStartedAction{TurnID: id, StartedAt: client.Now(), Message: msg})
}

// newChatAction takes the new-chat form: POST /ui/session/chat makes a
// chat in the session (createChat), its first turn the message given if
// any, and goes to its page.
func (d *Dashboard) newChatAction(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	f := r.PostForm
	uri := f.Get("uri")
	if err := readTarget(uri, ""); err != nil {
		d.fail(w, r, err)
		return
	}
	text, err := readMessage(f.Get("text"), false)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	chat := protocol.ChatURIFor(uri, "ui-"+randomHex(6))
	d.writeSession(w, r, uri, chat, "newchat", func(ctx context.Context, c *client.Client) error {
		params := protocol.CreateChatParams{Channel: uri, Chat: chat}
		if strings.TrimSpace(text) != "" {
			params.InitialMessage = &protocol.Message{Text: text, Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}}
		}
		return c.Call(ctx, "createChat", params, nil)
	})
}

// randomHex is n random bytes in hex, for the ids the dashboard picks.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// foldLines is how many lines of a tool's output are shown unfolded.
const foldLines = 12

// Folded says the tool's result is long: the page folds it, showing
// ResultHead, the first foldLines lines, above it.
func (t *toolView) Folded() bool { return strings.Count(t.Result, "\n") >= foldLines }

// ResultHead is the first lines of a long result.
func (t *toolView) ResultHead() string {
	s := t.Result
	for i, n := 0, 0; i < len(s); i++ {
		if s[i] == '\n' {
			if n++; n == foldLines {
				return s[:i]
			}
		}
	}
	return s
}

// ResultLines is how many lines the result has.
func (t *toolView) ResultLines() int {
	return strings.Count(strings.TrimRight(t.Result, "\n"), "\n") + 1
}
