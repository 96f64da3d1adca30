package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// run is one turn's script being run.
type run struct {
	agent *Agent
	turn  *recorder
	seq   int64 // the turn's number
	calls int   // tool calls and questions so far, for their ids
}

// script runs text one line at a time, from line from (0 is the first).
// A step's error ends the turn; it returns the line it stopped at.
func (r *run) script(ctx context.Context, text string, from int) (int, error) {
	for n, line := range strings.Split(text, "\n") {
		if n < from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if err := r.step(ctx, line); err != nil {
			return n, r.failed(ctx, n, line, err)
		}
		if err := r.steered(ctx); err != nil {
			return n, err
		}
	}
	return 0, nil
}

// failed is the error that ends the turn at line n.
func (r *run) failed(ctx context.Context, n int, line string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var fe failError
	switch {
	case errors.As(err, &fe):
		return errors.New(string(fe))
	case plugins.IsInterrupted(err):
		return err
	}
	return fmt.Errorf("line %d %q: %w", n+1, line, err)
}

// steered runs the steering messages a client left for the turn, each a
// script of its own, before the turn goes on.
func (r *run) steered(ctx context.Context) error {
	for {
		m, ok := r.turn.Steer()
		if !ok {
			return nil
		}
		for n, line := range strings.Split(m.Text, "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if err := r.step(ctx, line); err != nil {
				return r.failed(ctx, n, line, err)
			}
		}
	}
}

// failError is the error a fail step asks for. It ends the turn carrying
// exactly the script's message.
type failError string

func (e failError) Error() string { return string(e) }

// step runs one line of the script.
func (r *run) step(ctx context.Context, line string) error {
	word, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch word {
	case "say":
		return r.say(ctx, arg)
	case "think":
		if arg != "" {
			r.turn.Reasoning(arg)
		}
	case "title":
		r.turn.Title(arg)
	case "fail":
		if arg == "" {
			arg = "script failed"
		}
		return failError(arg)
	case "crash":
		// As if the agent's process died here: the turn can be continued
		// from the next line (chat/turnResume).
		if arg == "" {
			arg = "the agent process exited"
		}
		return plugins.Interrupted(errors.New(arg))
	case "write":
		path, content, _ := strings.Cut(arg, " ")
		if path == "" {
			return errors.New("write needs a path")
		}
		return r.write(ctx, path, strings.ReplaceAll(content, `\n`, "\n"))
	case "run":
		if arg == "" {
			return errors.New("run needs a command")
		}
		return r.run(ctx, arg)
	case "ask":
		if arg == "" {
			return errors.New("ask needs a question")
		}
		return r.ask(ctx, arg)
	case "wait":
		d, err := duration(arg)
		if err != nil {
			return err
		}
		// A client steering the turn ends the wait: the agent turns to
		// what it was told.
		return sleep(ctx, d, r.turn.Steered())
	case "background":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		return r.agent.background(d, r.nextID("background"), r.turn)
	default:
		r.turn.Text(line + "\n\n")
	}
	return nil
}

// nextID returns a tool call or question id unique in the conversation:
// the turn's number makes it unique across turns.
func (r *run) nextID(kind string) string {
	r.calls++
	return fmt.Sprintf("%s-%d-%d", kind, r.seq, r.calls)
}

// say streams text as a paragraph in chunks of a few words, as a model
// would. A cancelled turn stops saying.
func (r *run) say(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	// The chunks would share the prompt's memory, and every client's
	// state and the host's replay hold chunks long after the prompt.
	text = strings.Clone(text)
	chunks := chunkWords(text, min(3, max(1, len(strings.Fields(text))/2)))
	chunks[len(chunks)-1] += "\n\n"
	for i, c := range chunks {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r.turn.Text(c)
	}
	return nil
}

// chunkWords splits text into pieces of perChunk words each, the last
// one shorter. The pieces concatenate to text exactly: spaces stay with
// the word before them.
func chunkWords(text string, perChunk int) []string {
	var out []string
	start, words, inWord := 0, 0, false
	for i, c := range text {
		space := unicode.IsSpace(c)
		if !space && !inWord {
			if words == perChunk {
				out = append(out, text[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	return append(out, text[start:])
}

// ask puts question to the user and says the answer.
func (r *run) ask(ctx context.Context, question string) error {
	req := protocol.ChatInputRequest{
		ID:      r.nextID("ask"),
		Message: new(question),
		Questions: []protocol.ChatInputQuestion{
			&protocol.ChatInputTextQuestion{ID: "answer", Message: question, Required: new(true)},
		},
	}
	answer, err := r.turn.Ask(ctx, req)
	if err != nil {
		return err
	}
	if text, ok := answerText(answer.Response, answer.Answers); ok {
		return r.say(ctx, text)
	}
	return r.say(ctx, "No answer was given.")
}

// answerText returns the text answered to the question of an ask step.
func answerText(resp protocol.ChatInputResponseKind, answers protocol.Map[protocol.ChatInputAnswer]) (string, bool) {
	if resp != protocol.ChatInputResponseKindAccept {
		return "", false
	}
	a, _ := answers.Get("answer")
	answered, ok := a.(*protocol.ChatInputAnswered)
	if !ok {
		return "", false
	}
	v, ok := answered.Value.(*protocol.ChatInputTextAnswerValue)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// duration reads a wait: a Go duration ("500ms", "2m"), or a number of
// seconds.
func duration(arg string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(arg, 64); err == nil && secs >= 0 && secs < 1e6 {
		return time.Duration(secs * float64(time.Second)), nil
	}
	return time.ParseDuration(arg)
}

// sleep waits for d, until ctx ends, or until woken receives.
func sleep(ctx context.Context, d time.Duration, woken <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-woken:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
