package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Answering what a turn waits on: a question (an input request) or a
// tool call to approve. Each is sent as the client action a person's
// client sends (chat/inputCompleted, chat/toolCallConfirmed), so the host
// checks the grant it needs (chat:answer, chat:tool) as for anybody.

// answerBody is POST /v1/sessions/{id}/questions/{requestId}.
type answerBody struct {
	// Answer is the answer to the request's one question: a string, a
	// number, a boolean, or a list (several options).
	Answer json.RawMessage `json:"answer"`
	// Answers answers several questions, by question id.
	Answers map[string]json.RawMessage `json:"answers"`
	// Decline declines the request.
	Decline bool `json:"decline"`
}

// confirmBody is POST /v1/sessions/{id}/tool-calls/{toolCallId}.
type confirmBody struct {
	Decision string `json:"decision"` // approve, deny
	Option   string `json:"option"`   // one of the options the call offers
}

func (a *API) answerQuestion(w http.ResponseWriter, r *http.Request) {
	var b answerBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	a.respond(w, r, "requestId", "question", func(wt client.Waiting) (protocol.Action, error) {
		if wt.Request == nil {
			return nil, notFound("%s is a tool call: POST it to /tool-calls/", protocol.Quote(wt.ID))
		}
		return b.action(wt.Request)
	})
}

func (a *API) confirmToolCall(w http.ResponseWriter, r *http.Request) {
	var b confirmBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	if b.Decision != "approve" && b.Decision != "deny" {
		a.fail(w, r, badRequest("decision", `decision is "approve" or "deny"`))
		return
	}
	a.respond(w, r, "toolCallId", "tool call", func(wt client.Waiting) (protocol.Action, error) {
		if wt.Tool == nil {
			return nil, notFound("%s is a question: POST it to /questions/", protocol.Quote(wt.ID))
		}
		act, err := client.Confirm(wt.TurnID, wt.Tool, b.Decision == "approve", b.Option)
		if err != nil {
			return nil, badRequest("option", "%v", err)
		}
		return act, nil
	})
}

// respond finds what the path names in the session, builds its answer
// with build, and sends it: 404 for what is not waiting (unknown, or
// answered already), 409 turn_ended for what a turn that ended asked.
func (a *API) respond(w http.ResponseWriter, r *http.Request, param, what string, build func(client.Waiting) (protocol.Action, error)) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	id := r.PathValue(param)
	if len(id) > maxIDBytes {
		a.fail(w, r, badRequest(param, "a %s id of %d bytes: at most %d", what, len(id), maxIDBytes))
		return
	}
	ctx := r.Context()
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	wt, err := a.waitingFor(ctx, c, uri, id, what)
	if err == nil {
		var act protocol.Action
		if act, err = build(wt); err == nil {
			err = c.Respond(ctx, wt, act)
		}
	}
	if err != nil {
		a.fail(w, r, answerError(what, id, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "turnId": wt.TurnID, "lastSeq": c.LastSeq()})
}

// maxIDBytes bounds a question's or tool call's id in a path.
const maxIDBytes = 256

// waitingFor finds the question or tool call id in the session's chats.
func (a *API) waitingFor(ctx context.Context, c *client.Client, uri, id, what string) (client.Waiting, error) {
	if _, err := watchSession(ctx, c, uri); err != nil {
		return client.Waiting{}, err
	}
	wt, found, err := c.FindIn(ctx, uri, id)
	switch {
	case err != nil:
		return wt, err
	case found == client.FoundSettled:
		return wt, client.ErrSettled
	case found == client.FoundEnded:
		return wt, client.ErrTurnEnded
	case found == client.NotFound:
		return wt, notFound("session %s has no %s %s", protocol.Quote(idOf(uri)), what, protocol.Quote(id))
	}
	return wt, nil
}

// answerError maps why an answer was not taken.
func answerError(what, id string, err error) error {
	var ae *client.AnswerError
	switch {
	case errors.Is(err, client.ErrSettled):
		return notFound("the %s %s was answered already", what, protocol.Quote(id))
	case errors.Is(err, client.ErrTurnEnded):
		return &apiError{Status: http.StatusConflict, Code: "turn_ended", Message: fmt.Sprintf("the turn that asked %s %s has ended", what, protocol.Quote(id))}
	case errors.As(err, &ae):
		field := "answer"
		if ae.Question != "" {
			field = "answers." + ae.Question
		}
		return badRequest(field, "%s", ae.Message)
	}
	return err
}

// action is the chat/inputCompleted the body asks for.
func (b *answerBody) action(req *protocol.ChatInputRequest) (protocol.Action, error) {
	given := b.Answer != nil
	switch {
	case b.Decline && (given || b.Answers != nil):
		return nil, badRequest("decline", "a declined request takes no answer")
	case b.Decline:
		return client.Decline(req), nil
	case given && b.Answers != nil:
		return nil, badRequest("answers", "give answer (the one question's) or answers (by question id), not both")
	case !given && b.Answers == nil:
		return nil, badRequest("answer", `give answer, answers {"<question id>": ...}, or decline: true`)
	}
	answers := client.Answers{}
	if given {
		values, err := jsonValues("answer", b.Answer)
		if err != nil {
			return nil, err
		}
		if answers, err = client.Sole(req, values...); err != nil {
			return nil, err
		}
	}
	for qid, raw := range b.Answers {
		if len(qid) > maxIDBytes {
			return nil, badRequest("answers", "a question id of %d bytes: at most %d", len(qid), maxIDBytes)
		}
		values, err := jsonValues("answers."+qid, raw)
		if err != nil {
			return nil, err
		}
		answers[qid] = values
	}
	return client.Accept(req, answers)
}

// jsonValues reads an answer as the values client.Accept takes: a
// string, a number or a boolean is one, a list is several, null none.
func jsonValues(field string, raw json.RawMessage) ([]string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, badRequest(field, "%s is not JSON", field)
	}
	one := func(v any) (string, bool) {
		switch v := v.(type) {
		case string:
			return v, true
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), true
		case bool:
			return strconv.FormatBool(v), true
		}
		return "", false
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := one(e)
			if !ok {
				return nil, badRequest(field, "%s is a list of strings, numbers or booleans", field)
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, ok := one(v)
	if !ok {
		return nil, badRequest(field, "%s is a string, a number, a boolean or a list of them", field)
	}
	return []string{s}, nil
}
