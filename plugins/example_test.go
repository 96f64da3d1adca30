package plugins_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/plugins/script"
	"github.com/ahpd/ahpd/protocol"
)

// A Backend starts an Agent for one conversation, and the Agent runs one
// turn per Prompt, reporting what it does to a Turn. In ahpd the host's
// chat is the Turn; here pluginstest.Turn stands in for it and records
// the calls. The script backend reads the message as steps, one a line.
func ExampleBackend() {
	state, err := os.MkdirTemp("", "ahpd-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	work := filepath.Join(state, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}

	var b plugins.Backend = script.New(filepath.Join(state, "transcripts"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The conversation id is the caller's to choose; Dir must be an
	// existing absolute path.
	conv := plugins.Conversation{ID: "conv-1", Dir: work}
	agent, err := b.Start(ctx, plugins.StartOptions{Conversation: conv})
	if err != nil {
		log.Fatal(err)
	}

	turn := pluginstest.NewTurn("turn-1")
	msg := protocol.Message{
		Text:   "title Greeting\nsay hello, world",
		Origin: protocol.MessageOrigin{Kind: protocol.MessageKindUser},
	}
	// Prompt returns when the turn has ended: no waiting on the Turn.
	if err := agent.Prompt(ctx, msg, turn); err != nil {
		log.Fatal(err)
	}
	fmt.Println("title:", turn.Of("title")[0].Text)
	fmt.Printf("text: %q\n", turn.Response())

	// The conversation outlives its agent: the backend reads its turns
	// back from its own record, as the host does after a restart.
	if err := agent.Close(); err != nil {
		log.Fatal(err)
	}
	turns, err := b.Turns(ctx, conv)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recorded:", len(turns), "turn,", turns[0].ID, turns[0].State)

	// Output:
	// title: Greeting
	// text: "hello, world\n\n"
	// recorded: 1 turn, turn-1 complete
}

// The host finds a session's backend by its provider in a Registry.
func ExampleRegistry() {
	backends := plugins.NewRegistry()
	if err := backends.Register(script.New(os.TempDir())); err != nil {
		log.Fatal(err)
	}
	// A provider is registered once.
	err := backends.Register(script.New(os.TempDir()))
	fmt.Println(err)

	b, ok := backends.Get("script")
	fmt.Println(ok, b.Info().DisplayName, backends.Providers())

	// Output:
	// plugins: provider "script" is registered twice
	// true Script [script]
}
