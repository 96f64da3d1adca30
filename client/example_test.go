package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// A client creates a session, watches its default chat, sends a turn and
// reads the reply from the chat's state, which it keeps up to date from
// the actions the host sends. The host here is a real one on 127.0.0.1
// running the deterministic script backend, as an ahpd daemon would.
func Example() {
	state, err := os.MkdirTemp("", "ahpd-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	work := filepath.Join(state, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host: what `ahpd --provider script` serves, without the daemon.
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(filepath.Join(state, "transcripts"))); err != nil {
		log.Fatal(err)
	}
	const token = "example-token"
	h, err := host.New(host.Options{
		StateDir: state,
		Sessions: "memory",
		Backends: backends,
		Auth:     &grants.Authenticator{Host: "example", ConnectionToken: token},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(false, ""))
	// Last in, first out: the host ends its connections before the
	// server waits for them.
	defer srv.Close()
	defer func() {
		if err := h.Close(ctx); err != nil {
			log.Fatal(err)
		}
	}()

	c, err := client.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &client.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The client names the session; its default chat is derived from it.
	session := "ahp-session:/example"
	err = c.Call(ctx, "createSession", protocol.CreateSessionParams{
		Channel:            session,
		Provider:           new("script"),
		WorkingDirectories: []string{"file://" + work},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	chat := protocol.DefaultChatURI(session)
	// Subscribe before sending, or the turn's actions are not applied and
	// the send's echo never comes.
	if _, err := c.Subscribe(ctx, chat); err != nil {
		log.Fatal(err)
	}

	// A turn is a client action on the chat. DispatchWait returns once the
	// host took it, not when the turn ends.
	err = c.DispatchWait(ctx, chat, &protocol.ChatTurnStartedAction{
		TurnID:    "turn-1",
		StartedAt: client.Now(),
		Message:   protocol.Message{Text: "say hello from the script backend", Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// A finished turn moves from the chat's activeTurn to its turns. Take
	// Changed before reading State, so a change in between is not missed;
	// WaitState does the same for a single condition.
	var done protocol.Turn
	for {
		changed := c.Changed()
		cs := c.State(chat).(*protocol.ChatState)
		if n := len(cs.Turns); n > 0 && cs.Turns[n-1].ID == "turn-1" {
			done = cs.Turns[n-1]
			break
		}
		select {
		case <-changed:
		case <-c.Disconnected():
			log.Fatal(c.Err())
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		}
	}
	fmt.Println(done.State)
	for _, p := range done.ResponseParts {
		if md, ok := p.(*protocol.MarkdownResponsePart); ok {
			fmt.Printf("%q\n", md.Content)
		}
	}

	// Output:
	// complete
	// "hello from the script backend\n\n"
}
